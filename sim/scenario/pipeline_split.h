#pragma once
// How many transformer layers each virtual pipeline stage holds: Megatron-core's rules
// (transformer_block.py get_num_layers_to_build, transformer_layer.py
// get_transformer_layer_offset, transformer_config.py and arguments.py checks).
//  - Even: num_layers / (pp x virtual_stages) per virtual stage (dualpipe and dualpipev, not
//    Megatron's: any count, the first virtual stages one layer longer).
//  - Uneven first / last stage (num_layers_in_first_pipeline_stage,
//    num_layers_in_last_pipeline_stage; --decoder-first/last-pipeline-num-layers): the given
//    count on that stage, split evenly over its virtual stages; the other layers evenly over the
//    middle stages.
//  - An explicit layout (pipeline_model_parallel_layout, --pipeline-model-parallel-layout): the
//    decoder layers (t) of each virtual stage as its string says, parsed as Megatron-core's
//    PipelineParallelLayerLayout parses it. MTP layers (m) go, as without a layout, with the
//    loss on the last virtual stage; Megatron-core's standalone MTP stage is refused.
//  - The embedding and the loss counted as layers (account_for_embedding_in_pipeline_split,
//    account_for_loss_in_pipeline_split): (num_layers + 1 or 2) split evenly, less one layer on
//    the first virtual stage of the first stage (the embedding's) and on the last virtual stage
//    of the last stage (the loss's).
// Layers go to virtual stages g = chunk x pp + stage in the order of g, so layer numbers ascend
// with g as Megatron's offsets do.
#include <cstdint>
#include <vector>

#include "sim/scenario/scenario.h"

namespace zerosim {

// Layers of each virtual stage g (pp x virtual_stages entries). Throws InputError naming the
// key when the split is one Megatron refuses. Without the uneven-split keys and without
// interleaving, a layer count that pp does not divide is split with the first stages one layer
// longer (DeepSpeed's and nanotron's pipelines accept it; Megatron does not: see
// pipeline_split_warning).
std::vector<std::int64_t> virtual_stage_layers(const Scenario& s);

// The virtual stages per pipeline stage an explicit layout implies (its stages / pp; throws on a
// layout that does not parse).
int pipeline_layout_virtual_stages(const Scenario& s);

// True when the split is the remainder-first one that Megatron itself would refuse
// (framework megatron, num_layers not divisible by pp, no uneven-split key).
bool megatron_would_refuse_split(const Scenario& s);

}  // namespace zerosim
