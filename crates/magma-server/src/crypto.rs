//! The rustls crypto provider, built explicitly from *ring*'s parts.
//!
//! rustls 0.23.48 deprecated `rustls::crypto::ring::default_provider`
//! because *ring* has no post-quantum key exchange. The post-quantum group
//! rustls recommends (X25519MLKEM768) exists only in the aws-lc-rs provider,
//! which needs cmake and a C toolchain at build time; this project builds with
//! a Rust toolchain alone, so it stays with *ring* and names its choices here:
//! the cipher suites are *ring*'s defaults (TLS 1.3 and 1.2 AEAD suites), the
//! key exchange groups X25519, then P-256, then P-384 (classical only), the
//! signature algorithms every certificate chain *ring* can verify. The
//! decision and when to revisit it: `docs/security.md`, "Crypto provider".
//!
//! This file is kept identical in `magma-server` and `magma-client` (a test
//! compares them); `magma-testkit` includes the client's copy.

use std::sync::Arc;

use rustls::SignatureScheme;
use rustls::crypto::ring as ring_parts;
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, SupportedKxGroup,
    WebPkiSupportedAlgorithms,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::SigningKey;
use webpki::ring as algs;

/// The key exchange groups offered, most preferred first.
pub(crate) static KX_GROUPS: &[&dyn SupportedKxGroup] = &[
    ring_parts::kx_group::X25519,
    ring_parts::kx_group::SECP256R1,
    ring_parts::kx_group::SECP384R1,
];

/// Every signature algorithm *ring* verifies, and which TLS signature scheme
/// may use which of them.
static SIGNATURES: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        algs::ECDSA_P256_SHA256,
        algs::ECDSA_P256_SHA384,
        algs::ECDSA_P384_SHA256,
        algs::ECDSA_P384_SHA384,
        algs::ED25519,
        algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        algs::RSA_PKCS1_2048_8192_SHA256,
        algs::RSA_PKCS1_2048_8192_SHA384,
        algs::RSA_PKCS1_2048_8192_SHA512,
        algs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        // TLS 1.2 does not tie an ECDSA scheme to one curve; TLS 1.3 does.
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[algs::ECDSA_P384_SHA384, algs::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[algs::ECDSA_P256_SHA256, algs::ECDSA_P384_SHA256],
        ),
        (SignatureScheme::ED25519, &[algs::ED25519]),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[algs::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[algs::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[algs::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// Random bytes and private keys from *ring*.
#[derive(Debug)]
struct Ring;

impl SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for Ring {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        ring_parts::sign::any_supported_type(&key_der)
    }
}

/// The provider every rustls configuration of this crate is built with.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        cipher_suites: ring_parts::DEFAULT_CIPHER_SUITES.to_vec(),
        kx_groups: KX_GROUPS.to_vec(),
        signature_verification_algorithms: SIGNATURES,
        secure_random: &Ring,
        key_provider: &Ring,
    })
}
