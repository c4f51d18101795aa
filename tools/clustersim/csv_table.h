// A CSV file as rows of fields, read with libcsv (RFC 4180 quoting), with its
// header's columns found by name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::clustersim {

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // rows[i] is line i + 2 of the file

  // The column with this header name, if any.
  std::optional<std::size_t> column(const std::string& name) const;
  // "path:line" of rows[i], for messages.
  std::string where(std::size_t row) const;
};

// Parses CSV text named `path` in messages; fails on malformed CSV, no
// header line, or a row whose field count differs from the header's.
Result<CsvTable> parse_csv(std::string_view text, const std::string& path);
// Reads a whole file and parses it; an unreadable file is an error too.
Result<CsvTable> read_csv(const std::string& path);

}  // namespace egpu::clustersim
