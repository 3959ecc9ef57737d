// Constants and names of the odmoe.v1 protocol shared by every node
// (proto/odmoe.proto is the wire format; this header has no gRPC in it).
//
//   if (hello.protocol_version() != kProtocolVersion) ... refuse ...
//   ODMOE_LOG_INFO("{} {} ready", RoleName(v1::ROLE_WORKER), id);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "odmoe.pb.h"

namespace odmoe {

/// Bumped on any incompatible change of proto/odmoe.proto. 2: the worker's
/// and the process's counters travel as typed fields of Node.Status
/// (WorkerStats, ProcessStats) instead of key/value strings, and the answer
/// carries this version (a node of version 1 would read them all as 0).
inline constexpr uint32_t kProtocolVersion = 2;

/// Largest message a node accepts (prefill mini-batches and KV alignment
/// chunks are sized to stay far below it).
inline constexpr int kMaxMessageBytes = 256 << 20;
/// What a reply with no tensor in it (a Welcome, a HintAck, a prediction, a
/// status) may take: the receive limit of links whose replies are small.
inline constexpr size_t kSmallReplyBytes = 1 << 20;

/// KV alignment is sent in chunks of at most this many bytes of K plus V.
inline constexpr size_t kKvChunkBytes = 8u << 20;

/// "main" | "shadow" | "worker" | "client" | "unspecified".
std::string RoleName(v1::Role role);
/// "starting" | "ready" | "draining" | "failed" | "unspecified".
std::string NodeStateName(v1::NodeState state);
/// Appends key = value to a Node.Status answer (text for people: counters
/// that programs read are typed fields, cluster/node_stats.h).
void AddStatusEntry(v1::NodeStatus* status, const std::string& key, const std::string& value);

/// 16 hex digits.
std::string FingerprintHex(uint64_t fingerprint);

}  // namespace odmoe
