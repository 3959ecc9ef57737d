#include "cluster/node_certificate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/regular_file.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

namespace fs = std::filesystem;

constexpr char kUriPrefix[] = "spiffe://odmoe/";

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// The last OpenSSL error as text (and the queue cleared).
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

std::optional<PeerRole> ParseRoleName(std::string_view name) {
  for (PeerRole r : {PeerRole::kMain, PeerRole::kShadow, PeerRole::kWorker, PeerRole::kOperator}) {
    if (PeerRoleName(r) == name) return r;
  }
  return std::nullopt;
}

// Node ids are plain names (topology.h); an identity with anything else is
// not one odmoe issued.
bool PlainName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  // A regular file only (a FIFO would block the read forever), of PEM size.
  absl::StatusOr<std::string> text = ReadRegularFile(path, 1 << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("cannot read ", path, ": ", text.status().message()));
  }
  return *text;
}

// Creates `path` (which must not exist) with `text`, mode `mode`.
absl::Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)) {
    return absl::InternalError(OpenSslError());
  }
  return BioText(bio.get());
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(bio.get(), cert)) return absl::InternalError(OpenSslError());
  return BioText(bio.get());
}

absl::StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return absl::InternalError(absl::StrCat("key generation: ", OpenSslError()));
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || !X509_add_ext(cert, ext.get(), -1)) {
    return absl::InternalError(absl::StrCat("certificate extension '", value, "': ", OpenSslError()));
  }
  return absl::OkStatus();
}

// A certificate for `key`'s public half, named `common_name`, signed by
// `issuer_key` (`issuer` null: self-signed, a CA).
absl::StatusOr<X509Ptr> MakeCertificate(EVP_PKEY* key, const std::string& common_name,
                                        X509* issuer, EVP_PKEY* issuer_key, int days,
                                        const std::vector<std::string>& extensions_san) {
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError(OpenSslError());
  X509_set_version(cert.get(), X509_VERSION_3);
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // clocks a little apart
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("odmoe"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  absl::Status st = AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (st.ok()) st = AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (issuer == nullptr) {
    if (st.ok()) st = AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    if (st.ok()) st = AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    if (st.ok()) st = AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    if (st.ok()) {
      st = AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    }
    if (st.ok()) st = AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    if (st.ok() && !extensions_san.empty()) {
      std::string san;
      for (const std::string& s : extensions_san) absl::StrAppend(&san, san.empty() ? "" : ",", s);
      st = AddExtension(cert.get(), signer, NID_subject_alt_name, san);
    }
  }
  if (!st.ok()) return st;
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return absl::InternalError(absl::StrCat("signing: ", OpenSslError()));
  }
  return cert;
}

// "IP:10.0.0.1" or "DNS:node-3.lan" for a node's host.
std::string HostName(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return "IP:" + host;
  }
  return "DNS:" + host;
}

struct CertificateAuthority {
  X509Ptr cert;
  KeyPtr key;  // null when the CA exists without its key here
};

absl::StatusOr<CertificateAuthority> LoadOrCreateCa(const NodeTls& tls, int days,
                                                    IssuedCertificates* report) {
  CertificateAuthority ca;
  const std::string key_path = CaKeyPath(tls);
  if (!fs::exists(tls.ca)) {
    if (fs::exists(key_path)) {
      return absl::AlreadyExistsError(absl::StrCat(
          key_path, " exists without its certificate ", tls.ca,
          " (remove it to start a new CA, or put the CA certificate back)"));
    }
    absl::StatusOr<KeyPtr> key = NewKey();
    if (!key.ok()) return key.status();
    absl::StatusOr<X509Ptr> cert =
        MakeCertificate(key->get(), "odmoe cluster CA", nullptr, key->get(), days, {});
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key_pem = KeyPem(key->get());
    absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
    if (!key_pem.ok()) return key_pem.status();
    if (!cert_pem.ok()) return cert_pem.status();
    if (absl::Status s = WriteNewFile(key_path, *key_pem, 0600); !s.ok()) return s;
    if (absl::Status s = WriteNewFile(tls.ca, *cert_pem, 0644); !s.ok()) return s;
    report->written.push_back(key_path);
    report->written.push_back(tls.ca);
    ca.cert = std::move(*cert);
    ca.key = std::move(*key);
    return ca;
  }
  absl::StatusOr<std::string> pem = ReadFile(tls.ca);
  if (!pem.ok()) return pem.status();
  BioPtr bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  ca.cert.reset(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!ca.cert) {
    return absl::InvalidArgumentError(absl::StrCat(tls.ca, ": not a PEM certificate"));
  }
  if (fs::exists(key_path)) {
    absl::StatusOr<std::string> key_pem = ReadFile(key_path);
    if (!key_pem.ok()) return key_pem.status();
    BioPtr kbio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
    ca.key.reset(PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr));
    if (!ca.key) return absl::InvalidArgumentError(absl::StrCat(key_path, ": not a PEM key"));
    if (X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat(key_path, " is not the key of the CA certificate ", tls.ca));
    }
  }
  return ca;
}

}  // namespace

std::string CertificateIdentityUri(const PeerIdentity& identity) {
  return absl::StrCat(kUriPrefix, ToAbsl(PeerRoleName(identity.role)), "/", identity.node_id);
}

absl::StatusOr<std::optional<PeerIdentity>> CertificateIdentity(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  std::unique_ptr<GENERAL_NAMES, NamesFree> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  std::optional<PeerIdentity> found;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
    const std::string text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                           static_cast<size_t>(ASN1_STRING_length(uri)));
    if (!absl::StartsWith(text, kUriPrefix)) continue;
    const std::vector<std::string> parts =
        absl::StrSplit(absl::string_view(text).substr(sizeof(kUriPrefix) - 1), '/');
    const std::optional<PeerRole> role =
        parts.size() == 2 ? ParseRoleName(parts[0]) : std::nullopt;
    if (!role || !PlainName(parts[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate identity '", text, "' is malformed (expected ", kUriPrefix,
                       "<main|shadow|worker|operator>/<node id>)"));
    }
    if (found) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate names two identities (", CertificateIdentityUri(*found),
                       ", ", text, ")"));
    }
    found = PeerIdentity{*role, parts[1]};
  }
  return found;
}

std::optional<PeerRole> RoleInTopology(const Topology& topology, std::string_view id) {
  if (id == kOperatorId) return PeerRole::kOperator;
  if (id == topology.main.id) return PeerRole::kMain;
  if (topology.shadow && id == topology.shadow->id) return PeerRole::kShadow;
  if (topology.FindWorker(id) != nullptr) return PeerRole::kWorker;
  return std::nullopt;
}

std::string CaKeyPath(const NodeTls& tls) {
  if (absl::EndsWith(tls.ca, ".pem")) return tls.ca.substr(0, tls.ca.size() - 4) + "-key.pem";
  return tls.ca + "-key.pem";
}

absl::StatusOr<IssuedCertificates> IssueClusterCertificates(const Topology& topology, int days) {
  const NodeTls& tls = topology.node_tls;
  if (!tls.enabled() || !tls.per_node()) {
    return absl::FailedPreconditionError(absl::StrCat(
        topology.path,
        ": node_tls must name one certificate per node, e.g. node_tls: { ca: certs/ca.pem, "
        "cert: \"certs/{id}.pem\", key: \"certs/{id}-key.pem\" } ({id} is each node's id)"));
  }
  if (days < 1 || days > 36500) {
    return absl::InvalidArgumentError(absl::StrCat("--days ", days, ": expected 1 to 36500"));
  }
  std::vector<std::pair<std::string, const NodeSpec*>> nodes;  // (id, spec or null: operator)
  for (const NodeSpec* n : topology.AllNodes()) nodes.emplace_back(n->id, n);
  nodes.emplace_back(kOperatorId, nullptr);
  const std::string ca_key = CaKeyPath(tls);
  for (const auto& [id, spec] : nodes) {
    const NodeTls mine = tls.ForNode(id);
    if (mine.cert == tls.ca || mine.key == tls.ca || mine.cert == ca_key || mine.key == ca_key) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", id, "'s certificate or key would be the CA's file (", mine.cert, ", ",
          mine.key, "); choose node_tls paths that cannot meet ca.pem / ca-key.pem"));
    }
  }
  IssuedCertificates report;
  absl::StatusOr<CertificateAuthority> ca = LoadOrCreateCa(tls, days, &report);
  if (!ca.ok()) return ca.status();
  for (const auto& [id, spec] : nodes) {
    const NodeTls mine = tls.ForNode(id);
    const bool have_cert = fs::exists(mine.cert), have_key = fs::exists(mine.key);
    if (have_cert && have_key) {
      report.kept.push_back(mine.cert);
      continue;
    }
    if (have_cert != have_key) {
      return absl::AlreadyExistsError(absl::StrCat(
          "node ", id, ": ", have_cert ? mine.cert : mine.key, " exists without ",
          have_cert ? mine.key : mine.cert, " (remove it to issue a new pair)"));
    }
    if (!ca->key) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", id, " has no certificate yet and the CA's key ", ca_key,
          " is not here to sign one (run this where the CA key is)"));
    }
    const PeerIdentity identity{*RoleInTopology(topology, id), id};
    std::vector<std::string> san;
    if (spec != nullptr && !spec->host.empty()) san.push_back(HostName(spec->host));
    san.push_back("URI:" + CertificateIdentityUri(identity));
    absl::StatusOr<KeyPtr> key = NewKey();
    if (!key.ok()) return key.status();
    absl::StatusOr<X509Ptr> cert =
        MakeCertificate(key->get(), absl::StrCat("odmoe ", ToAbsl(PeerRoleName(identity.role)),
                                                 " ", id),
                        ca->cert.get(), ca->key.get(), days, san);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key_pem = KeyPem(key->get());
    absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
    if (!key_pem.ok()) return key_pem.status();
    if (!cert_pem.ok()) return cert_pem.status();
    if (absl::Status s = WriteNewFile(mine.key, *key_pem, 0600); !s.ok()) return s;
    if (absl::Status s = WriteNewFile(mine.cert, *cert_pem, 0644); !s.ok()) return s;
    report.written.push_back(mine.cert);
    report.written.push_back(mine.key);
  }
  return report;
}

}  // namespace odmoe
