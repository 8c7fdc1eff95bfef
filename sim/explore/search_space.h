#pragma once
// The space `zerosim search` explores (search_space.cpp), as the search itself (search.cpp)
// uses it: the options checked into the scenario document every candidate starts from, the
// degree flags that bound the layouts (and name what empties them), and a candidate written
// into a scenario document.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "sim/explore/search.h"

namespace zerosim::explore::search_detail {

// The degree constraints (0 = not given).
struct DegreeFlag {
  const char* flag;
  int SearchOptions::*field;
};
inline constexpr DegreeFlag kDegreeFlags[] = {{"--tp", &SearchOptions::tp},
                                              {"--pp", &SearchOptions::pp},
                                              {"--max-tp", &SearchOptions::max_tp},
                                              {"--max-pp", &SearchOptions::max_pp}};

// The options checked (InputError names the flag) and the --set and --seq-length settings
// applied: the document every candidate starts from.
nlohmann::json base_document(const SearchOptions& o);

// The candidate's document with `gas` micro-batches per step (the screen uses fewer than the
// candidate's own) on `network` (empty: the scenario's).
nlohmann::json candidate_document(nlohmann::json doc, const Candidate& c, std::int64_t gas,
                                  const char* network);

}  // namespace zerosim::explore::search_detail
