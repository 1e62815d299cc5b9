//! Node authentication: a cluster's shared secret, proven at connect by challenge–response.
//!
//! # The model
//! Like BeeGFS's `connAuthFile` or munge's key, every node of a cluster holds the same secret
//! file (readable by its owner only). A server started with one sends a [`Reply::Challenge`]
//! with a fresh nonce as the first frame of every connection; the client answers
//! [`Request::Auth`] with its own nonce and `HMAC-SHA256(secret, "iosets-auth-v1 client" ‖
//! server nonce ‖ client nonce)`; the server checks it in constant time and answers
//! [`Reply::Authenticated`] with the same MAC under the label `server`, which the client checks
//! in turn (so a client never talks to a server that does not hold the secret either). Nothing
//! else is read from a connection before the proof; nothing secret ever crosses the wire, and a
//! recorded exchange cannot be replayed (the server's nonce is new each time).
//!
//! # What it is not
//! Not encryption: frames after the handshake travel in clear, as on BeeGFS and Lustre without
//! Kerberos. It proves *which cluster* a peer belongs to, not which user or job it is: the job id
//! and credentials in a header are still what the (authenticated) client says.
//!
//! [`Reply::Challenge`]: crate::Reply::Challenge
//! [`Reply::Authenticated`]: crate::Reply::Authenticated
//! [`Request::Auth`]: crate::Request::Auth

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a proof (an HMAC-SHA256).
pub const PROOF_LEN: usize = 32;
/// The shortest secret accepted, in bytes (after trimming white space): 128 bits.
pub const MIN_SECRET_LEN: usize = 16;
/// The longest secret file read, in bytes.
pub const MAX_SECRET_LEN: usize = 64 * 1024;

const CLIENT_LABEL: &[u8] = b"iosets-auth-v1 client";
const SERVER_LABEL: &[u8] = b"iosets-auth-v1 server";

/// Why a secret could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The file could not be read.
    #[error("cannot read the secret file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Other users may read or write the file: it would not be a secret.
    #[error(
        "the secret file {path} has mode {mode:o}: it must not be readable or writable by \
         other users (chmod 600, or 640 for a group of service accounts)"
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Too short, or too long, to be a key.
    #[error(
        "the secret {what} has {len} bytes: it needs {MIN_SECRET_LEN} to {MAX_SECRET_LEN} \
         (make one with `head -c 32 /dev/urandom | base64 > FILE`)"
    )]
    Length {
        /// The file, or "given".
        what: String,
        /// Its length after trimming.
        len: usize,
    },
}

/// A cluster's shared secret. `Debug` never shows it; equality is in constant time.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.0.len())
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        same_secret(&self.0, &other.0)
    }
}

impl Secret {
    /// The secret `bytes`, white space at both ends trimmed (a file written by `echo` ends in a
    /// newline).
    ///
    /// # Errors
    /// [`AuthError::Length`] outside [`MIN_SECRET_LEN`]`..=`[`MAX_SECRET_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Secret, AuthError> {
        Secret::trimmed(bytes, "given")
    }

    fn trimmed(bytes: &[u8], what: &str) -> Result<Secret, AuthError> {
        let t = bytes.trim_ascii();
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&t.len()) {
            return Err(AuthError::Length {
                what: what.to_string(),
                len: t.len(),
            });
        }
        Ok(Secret(Arc::from(t)))
    }

    /// Reads the secret file at `path`: refused if other users may read or write it.
    ///
    /// # Errors
    /// [`AuthError::Io`], [`AuthError::Permissions`], [`AuthError::Length`].
    pub fn from_file(path: &Path) -> Result<Secret, AuthError> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let io = |source| AuthError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let mode = file.metadata().map_err(io)?.permissions().mode() & 0o7777;
        if mode & 0o007 != 0 || mode & 0o020 != 0 {
            return Err(AuthError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        Secret::trimmed(&bytes, &path.display().to_string())
    }

    fn mac(&self, label: &[u8], server_nonce: &[u8], client_nonce: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        m.update(label);
        m.update(server_nonce);
        m.update(client_nonce);
        m
    }

    /// The client's proof over both nonces.
    pub fn client_proof(
        &self,
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
    ) -> [u8; PROOF_LEN] {
        self.mac(CLIENT_LABEL, server_nonce, client_nonce)
            .finalize()
            .into_bytes()
            .into()
    }

    /// The server's proof over both nonces.
    pub fn server_proof(
        &self,
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
    ) -> [u8; PROOF_LEN] {
        self.mac(SERVER_LABEL, server_nonce, client_nonce)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is the client's proof over both nonces (compared in constant time).
    pub fn check_client(
        &self,
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; PROOF_LEN],
    ) -> bool {
        self.mac(CLIENT_LABEL, server_nonce, client_nonce)
            .verify_slice(proof)
            .is_ok()
    }

    /// Whether `proof` is the server's proof over both nonces (compared in constant time).
    pub fn check_server(
        &self,
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; PROOF_LEN],
    ) -> bool {
        self.mac(SERVER_LABEL, server_nonce, client_nonce)
            .verify_slice(proof)
            .is_ok()
    }
}

/// A fresh nonce from the operating system's random source.
///
/// # Errors
/// When the OS has no randomness to give (it is then unsafe to authenticate anyone).
pub fn nonce() -> Result<[u8; NONCE_LEN], getrandom::Error> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n)?;
    Ok(n)
}

/// Whether `a` and `b` are equal, in a time that depends on neither their contents nor the
/// length of `b` (the secret side): both are hashed, and the digests compared without an early
/// exit. For tokens a peer sends.
pub fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    let (x, y) = (Sha256::digest(given), Sha256::digest(secret));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_check_and_differ_by_side_and_nonce() {
        let s = Secret::new(b"  0123456789abcdef0123\n").unwrap();
        let (sn, cn) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(sn, cn, "two nonces from the OS");
        let p = s.client_proof(&sn, &cn);
        assert!(s.check_client(&sn, &cn, &p));
        assert!(
            !s.check_server(&sn, &cn, &p),
            "a client proof is not a server proof"
        );
        assert!(
            !s.check_client(&cn, &sn, &p),
            "nonces are not interchangeable"
        );
        let other = Secret::new(b"0123456789abcdef0124").unwrap();
        assert!(!other.check_client(&sn, &cn, &p));
        let mut bad = p;
        bad[31] ^= 1;
        assert!(!s.check_client(&sn, &cn, &bad));
        assert!(s.check_server(&sn, &cn, &s.server_proof(&sn, &cn)));
        assert_eq!(format!("{s:?}"), "Secret(<20 bytes>)");
    }

    #[test]
    fn short_secrets_and_open_files_are_refused() {
        assert!(matches!(
            Secret::new(b"short\n"),
            Err(AuthError::Length { len: 5, .. })
        ));
        let dir = std::env::temp_dir().join(format!("iosets-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("secret");
        std::fs::write(&f, "0123456789abcdef0123456789abcdef\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Secret::from_file(&f).unwrap_err();
        assert!(e.to_string().contains("644"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Secret::from_file(&f).unwrap(),
            Secret::new(b"0123456789abcdef0123456789abcdef").unwrap()
        );
        let e = Secret::from_file(&dir.join("missing")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn token_comparison() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
        assert!(!same_secret(b"", b"ab"));
    }
}
