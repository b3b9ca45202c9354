// Fixture: libprotobuf and the generated Chakra messages in sim/formats/ are allowed.
#pragma once

#include <google/protobuf/io/coded_stream.h>

#include "sim/formats/chakra/et_def.pb.h"
