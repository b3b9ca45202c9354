// Fixture: the Chakra ET reader of sim/formats/ is allowed in workloads/trace/; libprotobuf and
// the generated messages' own header are not.
#include <google/protobuf/message_lite.h>

#include "sim/formats/chakra/et_def.pb.h"
#include "sim/formats/chakra_et.h"
