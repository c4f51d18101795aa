// egpuctl against answers it cannot read (an agent of another version, or
// something else on the socket): a message that says so and exit status 1,
// never an abort or nlohmann's text alone.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "core/protocol/codec.h"
#include "core/util/subprocess.h"
#include "tests/unit/protocol/scripted_agent.h"

namespace egpu::test {
namespace {

// Each answer is valid JSON of a shape this egpuctl does not read. (Under
// AddressSanitizer, one without "agent" read past a buffer before.)
struct Answer {
  const char* name;
  const char* text;
};

void PrintTo(const Answer& answer, std::ostream* os) {
  *os << answer.name;
}

class EgpuctlAnswers : public ::testing::TestWithParam<Answer> {};

TEST_P(EgpuctlAnswers, AStatusOfTheWrongShapeIsAClearError) {
  const std::string answer = GetParam().text;
  ScriptedAgent agent([&answer](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    r.text = answer;
    send_with_fds(conn, protocol::encode_reply(r, id));
  });
  const auto run =
      run_processes({{EGPU_EGPUCTL_PATH, "--socket", agent.path(), "status"}}, 20'000).front();
  EXPECT_EQ(run.exit_code, 1) << answer << "\n" << run.out << run.err;
  EXPECT_NE(run.err.find("egpuctl: the agent's answer is not what this egpuctl reads (an agent "
                         "of another version, or not an egpu agent?)"),
            std::string::npos)
      << run.err;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EgpuctlAnswers,
    ::testing::Values(Answer{"GpusNotAList", R"({"node":"n1","gpus":"not a list"})"},
                      Answer{"AString", R"("a string")"}, Answer{"AnArray", R"([1,2])"},
                      Answer{"AgentNotAnObject", R"({"agent":7,"gpus":[]})"},
                      Answer{"HolderNotANumber",
                             R"({"gpus":[{"index":0,"holder":"me","instances":[]}]})"},
                      Answer{"InstanceIdNotANumber",
                             R"({"gpus":[{"index":0,"instances":[{"id":"x","job":1}]}]})"}),
    [](const ::testing::TestParamInfo<Answer>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace egpu::test
