// Node certificates that name a role: with `node_tls` and one certificate per
// node (`cert: certs/{id}.pem`), the certificate, not only the cluster secret,
// proves who is calling (docs/operations.md, "Security").
//
// A node certificate carries its identity as a URI subject alternative name
//
//   spiffe://odmoe/<role>/<node id>          e.g. spiffe://odmoe/main/main
//
// (the SPIFFE form, so that other tools read it as an identity too) next to
// the node's address as an IP or DNS name. A node whose own certificate names
// an identity accepts node calls only from peers whose certificate names one,
// and only when it is the identity the call's credential claims: a machine
// that holds worker w3's key and the cluster secret still cannot act as the
// main node or the operator. A cluster with one shared certificate (no
// identity in it) keeps the credential's word for the role.
//
// IssueClusterCertificates writes what a topology's per-node node_tls names:
// a CA (its key next to it, `ca.pem` -> `ca-key.pem`) and a certificate and key
// for every node and for the operator (kOperatorId), ECDSA P-256, keys
// owner-only. Files that exist are kept, so running it again after adding
// workers signs only theirs (with the existing CA key).
//
//   ODMOE_ASSIGN_OR_RETURN(std::optional<PeerIdentity> who, CertificateIdentity(pem));
//   ODMOE_ASSIGN_OR_RETURN(IssuedCertificates made, IssueClusterCertificates(topology, 825));
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/peer_auth.h"
#include "topology/topology.h"

namespace odmoe {

/// "spiffe://odmoe/" + role + "/" + id.
std::string CertificateIdentityUri(const PeerIdentity& identity);

/// The odmoe identity a PEM certificate names (its first certificate, when it
/// holds a chain); nullopt when it names none. INVALID_ARGUMENT when the text
/// is not a certificate, or it names two identities or a malformed one.
absl::StatusOr<std::optional<PeerIdentity>> CertificateIdentity(std::string_view pem);

/// The role node `id` has in `topology` (kOperatorId: the operator); nullopt
/// for an id that is not there.
std::optional<PeerRole> RoleInTopology(const Topology& topology, std::string_view id);

/// The CA's private key file: node_tls.ca with ".pem" replaced by
/// "-key.pem" (or "-key.pem" appended).
std::string CaKeyPath(const NodeTls& tls);

struct IssuedCertificates {
  std::vector<std::string> written;  // files created, in order
  std::vector<std::string> kept;     // certificates that existed already
};

/// Creates the CA (when node_tls.ca does not exist) and, for every node of
/// `topology` and the operator, the certificate and key node_tls names for
/// it, valid for `days` days. FAILED_PRECONDITION when the topology has no
/// per-node node_tls (cert and key with {id}), or a certificate is missing
/// while the CA exists without its key; ALREADY_EXISTS when only one of a
/// node's certificate and key exists; UNAVAILABLE when a file cannot be
/// written.
absl::StatusOr<IssuedCertificates> IssueClusterCertificates(const Topology& topology, int days);

}  // namespace odmoe
