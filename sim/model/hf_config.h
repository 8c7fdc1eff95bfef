#pragma once
// The Hugging Face config.json reader (hf_config.cpp), as the scenario reader (model_json.cpp)
// calls it: a config parsed into a ModelSpec, then its training length settled once any inline
// object has overridden the config.
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/json_readers.h"
#include "sim/model/model.h"

namespace zerosim::model_detail {

// The message of the warning settle_seq_length gives starts with this, so that a training length
// set afterwards (set_training_seq_length) can retract it.
inline const std::string kNoTrainingLength = "the config gives no training sequence length";

// Parses without the final validation and without the training length when the config gives
// none (seq_length 0): an inline object may still give it.
ModelSpec parse_hf(const json& cfg, const std::string& origin, FieldKeys& keys,
                   std::vector<InputWarning>& warnings);

// Once parsing and any inline override are done: the training length defaulted where still
// unknown (seq_length 0); a config without a position limit (ALiBi: BLOOM) takes it as one.
void settle_seq_length(ModelSpec& m, const std::string& key_path, const FieldKeys& keys,
                       std::vector<InputWarning>& warnings);

}  // namespace zerosim::model_detail
