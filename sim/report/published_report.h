#pragma once
// validate-published's results as JSON, a text table and a markdown table.
#include <string>

#include <nlohmann/json.hpp>

#include "sim/run/published.h"

namespace zerosim {

nlohmann::json published_json(const PublishedSummary& s);
std::string published_text(const PublishedSummary& s);
std::string published_markdown(const PublishedSummary& s);

}  // namespace zerosim
