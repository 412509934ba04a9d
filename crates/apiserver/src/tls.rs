//! HTTPS: serving over TLS (rustls with the ring provider), with a certificate the caller brings
//! or one signed by a throwaway CA generated at start.
//!
//! With [`ApiServerConfig::tls`](crate::ApiServerConfig::tls) set, every accepted connection
//! completes a TLS handshake before it reaches HTTP, and [`ApiServer::url`](crate::ApiServer::url)
//! is `https://...`. kubectl (client-go) sends a kubeconfig's bearer token only to an HTTPS
//! server, so a server with a token needs TLS for kubectl.
//!
//! [`SelfSignedTls::generate`] makes a CA and a serving certificate for loopback (`localhost`,
//! `127.0.0.1`, `::1`) and any other addresses given; the CA's private key is dropped once it has
//! signed, so nothing else can ever be signed by it. Clients trust the CA's PEM
//! ([`SelfSignedTls::ca_pem`]), as a kubeconfig's `certificate-authority-data` carries it.
//!
//! ```
//! use ctrlkit_apiserver::tls::SelfSignedTls;
//! use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let generated = SelfSignedTls::generate(&[]).unwrap();
//! assert!(generated.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
//! let config = ApiServerConfig {
//!     tls: Some(generated.tls()),
//!     ..ApiServerConfig::default()
//! };
//! let server = ApiServer::start(config).await.unwrap();
//! assert!(server.url().starts_with("https://127.0.0.1:"));
//! server.shutdown().await;
//! # }
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Why TLS could not be set up. Messages never hold key material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or signing a certificate failed.
    #[error("cannot generate the TLS certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate, the key or the protocol versions.
    #[error("cannot configure TLS: {0}")]
    Configure(#[from] rustls::Error),
}

/// How the server speaks TLS: a rustls [`ServerConfig`] (certificate chain, key, versions).
///
/// The server speaks HTTP/1.1 only: a `ServerConfig` brought with [`TlsConfig::new`] should offer
/// no ALPN protocol but `http/1.1` (those this module builds offer exactly that).
#[derive(Clone)]
pub struct TlsConfig {
    server: Arc<ServerConfig>,
}

impl TlsConfig {
    /// TLS as `server` configures it.
    pub fn new(server: Arc<ServerConfig>) -> Self {
        Self { server }
    }

    /// TLS with this certificate chain (the serving certificate first, in DER) and its private
    /// key, on rustls' safe default protocol versions with the ring provider, offering
    /// `http/1.1` by ALPN.
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self::new(Arc::new(server)))
    }

    /// The rustls configuration.
    pub fn server_config(&self) -> &Arc<ServerConfig> {
        &self.server
    }
}

/// A client's TLS trusting `roots`, on rustls' safe default protocol versions with the ring
/// provider, as the server's.
pub(crate) fn client_config(roots: RootCertStore) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

/// A serving certificate signed by a CA generated for it, and that CA's certificate for clients
/// to trust; see the [module documentation](self).
#[derive(Debug, Clone)]
pub struct SelfSignedTls {
    tls: TlsConfig,
    ca_pem: String,
}

impl SelfSignedTls {
    /// Generates a CA (ECDSA P-256) and a serving certificate it signs, valid for `localhost`,
    /// `127.0.0.1`, `::1` and `addresses` (unspecified addresses such as `0.0.0.0` are left out:
    /// no client connects to them). The CA's private key is dropped here.
    pub fn generate(addresses: &[IpAddr]) -> Result<Self, TlsError> {
        let mut ca_params = CertificateParams::default();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.distinguished_name = name("ctrlkit apiserver CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let mut ips = vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        for address in addresses {
            if !address.is_unspecified() && !ips.contains(address) {
                ips.push(*address);
            }
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = name("ctrlkit apiserver");
        params.subject_alt_names = std::iter::once(SanType::DnsName("localhost".try_into()?))
            .chain(ips.into_iter().map(SanType::IpAddress))
            .collect();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let certificate = params.signed_by(&key, &ca)?;

        let chain = vec![certificate.der().clone(), ca.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok(Self {
            tls: TlsConfig::from_der(chain, key)?,
            ca_pem: ca.pem(),
        })
    }

    /// The TLS configuration to serve with.
    pub fn tls(&self) -> TlsConfig {
        self.tls.clone()
    }

    /// The CA's certificate, PEM-encoded: what clients should trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA's PEM in base64, as a kubeconfig's `certificate-authority-data` holds it.
    pub fn ca_data(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

/// A distinguished name with this common name.
fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}
