// The language-model data layer in one include: preparing a token dataset folder from text
// (prepare_dataset.h: prepare_dataset, prepare_once, read_dataset_info), its shards
// (token_shard.h) and the batch source over a split (token_batches.h).
#pragma once
#include "train/data/tokens/prepare_dataset.h"
#include "train/data/tokens/token_batches.h"
#include "train/data/tokens/token_shard.h"
