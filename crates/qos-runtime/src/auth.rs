//! Agent authentication to the master: a shared secret read from a file and presented
//! as `Authorization: Bearer <secret>`, compared in constant time.
//!
//! The thesis assumes every node is trusted (§3.5); on a commodity cluster the master
//! still refuses agents that do not hold the cluster's secret.

use std::path::Path;

use subtle::ConstantTimeEq;

/// Shortest secret accepted.
pub const MIN_SECRET_LEN: usize = 16;

/// Why a secret file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file could not be read.
    #[error("secret file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secret is too short or not printable.
    #[error("secret file {path}: the secret must be at least {MIN_SECRET_LEN} printable characters (no spaces) on one line")]
    Weak {
        /// The file.
        path: String,
    },
}

/// The cluster's shared secret.
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Reads the secret from `path` (surrounding whitespace ignored).
    pub fn load(path: &Path) -> Result<Secret, SecretError> {
        let text = std::fs::read_to_string(path).map_err(|source| SecretError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Secret::new(text.trim()).map_err(|_| SecretError::Weak {
            path: path.display().to_string(),
        })
    }

    /// A secret from its text; refuses short or non-printable ones.
    pub fn new(text: &str) -> Result<Secret, SecretError> {
        if text.len() < MIN_SECRET_LEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::Weak {
                path: "<given>".into(),
            });
        }
        Ok(Secret(text.to_string()))
    }

    /// The secret's text, for deriving keys from it (`transport::auth::DataKey`).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The `Authorization` header value to send.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// Whether an `Authorization` header value carries this secret (constant time in
    /// the secret's content). The scheme is matched without regard to case and may be
    /// followed by several spaces, as RFC 7235 §2.1 allows (`bearer`, `BEARER`).
    pub fn verify(&self, header: Option<&[u8]>) -> bool {
        let Some(h) = header else { return false };
        const SCHEME: &[u8] = b"bearer";
        if h.len() <= SCHEME.len() || !h[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
            return false;
        }
        let rest = &h[SCHEME.len()..];
        let token = rest.trim_ascii_start();
        if token.len() == rest.len() {
            return false; // no space after the scheme ("Bearerxyz")
        }
        token.ct_eq(self.0.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_secret_verifies() {
        let s = Secret::new("0123456789abcdef-secret").unwrap();
        assert!(s.verify(Some(s.bearer().as_bytes())));
        assert!(!s.verify(Some(b"Bearer 0123456789abcdef-secreT")));
        assert!(!s.verify(Some(b"Bearer 0123456789abcdef")));
        assert!(!s.verify(Some(b"0123456789abcdef-secret")));
        assert!(!s.verify(None));
        assert!(Secret::new("short").is_err());
    }

    #[test]
    fn the_scheme_is_case_insensitive_as_rfc_7235_says() {
        // Regression: lowercase `bearer` was refused.
        let s = Secret::new("0123456789abcdef-secret").unwrap();
        for h in [
            "bearer 0123456789abcdef-secret",
            "BEARER 0123456789abcdef-secret",
            "bEaReR  0123456789abcdef-secret",
        ] {
            assert!(s.verify(Some(h.as_bytes())), "{h}");
        }
        for h in [
            "Bearer0123456789abcdef-secret",
            "Basic 0123456789abcdef-secret",
            "bearer",
            "bearer ",
        ] {
            assert!(!s.verify(Some(h.as_bytes())), "{h}");
        }
    }
}
