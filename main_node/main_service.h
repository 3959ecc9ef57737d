// The Main gRPC service (Generate) over a MainNode. Only main_service.cpp
// compiles grpcpp.
#pragma once

#include <memory>

namespace grpc {
class Service;
}  // namespace grpc

namespace odmoe {

class MainNode;

class MainService {
 public:
  explicit MainService(MainNode& node);
  ~MainService();
  grpc::Service* grpc_service();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
