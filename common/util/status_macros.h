// Status helpers used across odmoe.
//
// Errors inside the nodes are values (absl::Status / absl::StatusOr<T>); these
// macros keep the propagation short:
//
//   absl::StatusOr<Model> LoadModel(const std::string& path) {
//     ODMOE_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
//     ODMOE_RETURN_IF_ERROR(ValidateModel(file));
//     ...
//   }
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ODMOE_STATUS_CONCAT_INNER_(a, b) a##b
#define ODMOE_STATUS_CONCAT_(a, b) ODMOE_STATUS_CONCAT_INNER_(a, b)

/// Returns from the current function with the status of `expr` if it is not OK.
#define ODMOE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status odmoe_status_ = (expr);         \
    if (!odmoe_status_.ok()) return odmoe_status_; \
  } while (0)

#define ODMOE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

/// `ODMOE_ASSIGN_OR_RETURN(T x, StatusOrExpr)`: declares/assigns `x` from the
/// value of a StatusOr, or returns its error status.
#define ODMOE_ASSIGN_OR_RETURN(lhs, expr) \
  ODMOE_ASSIGN_OR_RETURN_IMPL_(ODMOE_STATUS_CONCAT_(odmoe_statusor_, __LINE__), lhs, expr)
