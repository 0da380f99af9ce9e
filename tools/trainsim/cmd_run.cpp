#include "tools/trainsim/cli.h"
namespace ts::cli {
int cmd_run(const Args&) { return kExitInternal; }
int cmd_inspect(const Args&) { return kExitInternal; }
}  // namespace ts::cli
