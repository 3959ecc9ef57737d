// What a binary was built from, for --version: the project version, the git
// revision of the source tree at build time ("unknown" outside a checkout;
// "-dirty" when it had uncommitted changes) and the compute backends built in.
//
//   std::cout << VersionText("odmoe-run");
//   // odmoe-run 0.1.0 (git 1a2b3c4d5e6f), backends: cpu, cuda
#pragma once

#include <string>

namespace odmoe {

/// "PROGRAM VERSION (git REVISION), backends: LIST\n".
std::string VersionText(const std::string& program);

}  // namespace odmoe
