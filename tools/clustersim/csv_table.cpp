#include "tools/clustersim/csv_table.h"

#include <csv.h>

#include <array>
#include <cstdio>
#include <memory>

namespace egpu::clustersim {
namespace {

// libcsv calls back from C: the callbacks only append, never throw.
struct Collector {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> current;
};

extern "C" void on_field(void* text, std::size_t length, void* data) {
  auto* collector = static_cast<Collector*>(data);
  collector->current.emplace_back(static_cast<const char*>(text), length);
}

extern "C" void on_row_end(int /*terminator*/, void* data) {
  auto* collector = static_cast<Collector*>(data);
  collector->rows.push_back(std::move(collector->current));
  collector->current.clear();
}

struct ParserFree {
  void operator()(csv_parser* parser) const {
    csv_free(parser);
    delete parser;
  }
};

struct FileClose {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

std::optional<std::size_t> CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return std::nullopt;
}

std::string CsvTable::where(std::size_t row) const {
  return path + ":" + std::to_string(row + 2);
}

Result<CsvTable> parse_csv(std::string_view text, const std::string& path) {
  std::unique_ptr<csv_parser, ParserFree> parser(new csv_parser);
  if (csv_init(parser.get(), CSV_STRICT | CSV_STRICT_FINI) != 0) {
    return Error{"cannot start the CSV parser for " + path};
  }
  Collector collector;
  if (csv_parse(parser.get(), text.data(), text.size(), on_field, on_row_end, &collector) !=
      text.size()) {
    return Error{path + ": malformed CSV near row " + std::to_string(collector.rows.size() + 1) +
                 ": " + csv_strerror(csv_error(parser.get()))};
  }
  if (csv_fini(parser.get(), on_field, on_row_end, &collector) != 0) {
    return Error{path + ": malformed CSV at its end: " + csv_strerror(csv_error(parser.get()))};
  }
  if (collector.rows.empty()) return Error{path + ": empty file, a header line was expected"};
  CsvTable table;
  table.path = path;
  table.header = std::move(collector.rows.front());
  collector.rows.erase(collector.rows.begin());
  for (std::size_t i = 0; i < collector.rows.size(); ++i) {
    if (collector.rows[i].size() != table.header.size()) {
      return Error{table.where(i) + ": " + std::to_string(collector.rows[i].size()) +
                   " fields, the header has " + std::to_string(table.header.size())};
    }
  }
  table.rows = std::move(collector.rows);
  return table;
}

Result<CsvTable> read_csv(const std::string& path) {
  std::unique_ptr<std::FILE, FileClose> file(std::fopen(path.c_str(), "rb"));
  if (!file) return Error{"cannot read " + path};
  std::string text;
  std::array<char, 65536> buffer{};
  std::size_t read = 0;
  while ((read = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
    text.append(buffer.data(), read);
  }
  if (std::ferror(file.get())) return Error{"cannot read " + path};
  return parse_csv(text, path);
}

}  // namespace egpu::clustersim
