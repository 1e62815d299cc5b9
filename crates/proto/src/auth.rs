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
    /// The default secret file is not the server user's own.
    #[error(
        "the secret file {path} belongs to uid {owner}, not to this server's user (uid {uid}): \
         another user could know it; remove it (a new one is made at the next start) or give \
         --auth-file"
    )]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The user expected (the server's effective uid).
        uid: u32,
    },
    /// The default secret file may be read by the group or by other users.
    #[error(
        "the secret file {path} has mode {mode:o}: group or other users may read or write it, \
         so it is no secret; `chmod 600 {path}` (and replace the secret on every node if other \
         users may have read it)"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// No place for the default secret: not root, and neither `IOSETS_AUTH_FILE`,
    /// `XDG_STATE_HOME` nor `HOME` is set.
    #[error(
        "no default place for the cluster secret (not root, and none of {AUTH_FILE_VAR}, \
         XDG_STATE_HOME, HOME is set): give --auth-file FILE"
    )]
    NoDefaultPath,
    /// The OS gave no randomness for a new secret.
    #[error("no randomness for a new secret: {0}")]
    Random(String),
}

/// The environment variable naming this node's secret file, for servers and clients alike
/// ([`default_path`]).
pub const AUTH_FILE_VAR: &str = "IOSETS_AUTH_FILE";

/// Where a root server keeps the node's secret when none is configured.
pub const ROOT_SECRET_PATH: &str = "/etc/iosets/secret";

/// Bytes of randomness in a secret [`Secret::load_or_create`] makes (256 bits, written as 64
/// hexadecimal digits).
pub const NEW_SECRET_BYTES: usize = 32;

/// The default secret file of this node for the current user: `$IOSETS_AUTH_FILE` when set
/// (and not empty), else [`ROOT_SECRET_PATH`] for root, else
/// `$XDG_STATE_HOME/iosets/secret`, else `$HOME/.local/state/iosets/secret`.
///
/// `iosets serve` creates it at its first start when no secret is configured
/// ([`Secret::load_or_create`]); `iosets mount`, `ctl` and `top` on the same host, run by the
/// same user, find it there without a flag. Another user finds their own path, where no secret
/// is: the trust boundary is who may read the file.
///
/// # Errors
/// [`AuthError::NoDefaultPath`] when none of these applies.
pub fn default_path() -> Result<PathBuf, AuthError> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var(AUTH_FILE_VAR) {
        return Ok(p);
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from(ROOT_SECRET_PATH));
    }
    if let Some(state) = var("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Ok(state.join("iosets").join("secret"));
    }
    var("HOME")
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".local/state/iosets/secret"))
        .ok_or(AuthError::NoDefaultPath)
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

    /// The secret in `file` (opened from `path`, its permissions already checked): at most
    /// [`MAX_SECRET_LEN`] bytes and one more are read, so an oversized file is refused by
    /// length without being read whole.
    fn read_from(file: std::fs::File, path: &Path) -> Result<Secret, AuthError> {
        use std::io::Read;
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| AuthError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Secret::trimmed(&bytes, &path.display().to_string())
    }

    /// Reads the secret file at `path`: refused if other users may read or write it.
    ///
    /// # Errors
    /// [`AuthError::Io`], [`AuthError::Permissions`], [`AuthError::Length`].
    pub fn from_file(path: &Path) -> Result<Secret, AuthError> {
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
        Secret::read_from(file, path)
    }

    /// A new random secret ([`NEW_SECRET_BYTES`] from the OS, as hexadecimal), for a cluster
    /// that lives in one process or one run (a test, an experiment) and is handed to its
    /// clients directly.
    ///
    /// # Errors
    /// [`AuthError::Random`] when the OS gives no randomness.
    pub fn random() -> Result<Secret, AuthError> {
        Secret::trimmed(random_hex()?.as_bytes(), "made")
    }

    /// The node's default secret at `path` (see [`default_path`]), made at the first start:
    /// 256 random bits, written as hexadecimal to a new file of mode 0600 (its directories,
    /// when missing, are made with mode 0700). Returns the secret and whether it was made now.
    ///
    /// Stricter than [`Secret::from_file`], because nobody chose this file: an existing one
    /// must belong to the effective user and be readable by nobody else (no group bits), and
    /// a symbolic link is not followed.
    ///
    /// # Errors
    /// [`AuthError::Io`], [`AuthError::Owner`], [`AuthError::Exposed`],
    /// [`AuthError::Length`], [`AuthError::Random`].
    pub fn load_or_create(path: &Path) -> Result<(Secret, bool), AuthError> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let io = |source| AuthError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        // Written whole under a name of its own, then published with link(2), which fails if
        // the name exists: a server starting at the same time never reads a half-written file.
        let text = format!("{}\n", random_hex()?);
        let draft = path.with_file_name(format!(
            ".{}.{}.{}",
            path.file_name()
                .map_or("secret".into(), |n| n.to_string_lossy()),
            std::process::id(),
            random_hex()?.get(..8).unwrap_or("0"),
        ));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&draft)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.sync_all()
            });
        let published = written.and_then(|()| std::fs::hard_link(&draft, path));
        let _ = std::fs::remove_file(&draft);
        match published {
            Ok(()) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::File::open(dir)
                        .and_then(|d| d.sync_all())
                        .map_err(io)?;
                }
                Ok((Secret::trimmed(text.as_bytes(), "made")?, true))
            }
            // Made by an earlier start (or by another server starting at the same time).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Secret::load_private(path).map(|s| (s, false))
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Reads a secret file that must be the effective user's and private to it (no group or
    /// other bits), not through a symbolic link: the checks [`Secret::load_or_create`] makes
    /// of an existing file.
    ///
    /// # Errors
    /// [`AuthError::Io`], [`AuthError::Owner`], [`AuthError::Exposed`], [`AuthError::Length`].
    pub fn load_private(path: &Path) -> Result<Secret, AuthError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let io = |source| AuthError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let uid = rustix::process::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(AuthError::Owner {
                path: path.to_path_buf(),
                owner: meta.uid(),
                uid,
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(AuthError::Exposed {
                path: path.to_path_buf(),
                mode,
            });
        }
        Secret::read_from(file, path)
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

/// [`NEW_SECRET_BYTES`] random bytes from the OS, as hexadecimal digits.
fn random_hex() -> Result<String, AuthError> {
    let mut raw = [0u8; NEW_SECRET_BYTES];
    getrandom::getrandom(&mut raw).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
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
    fn the_default_secret_is_made_private_and_refused_when_exposed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("iosets-auth-default-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("state/iosets/secret");
        let (made, created) = Secret::load_or_create(&path).unwrap();
        assert!(created);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), 2 * NEW_SECRET_BYTES);
        // The second start reads the same secret; the client's reader agrees.
        let (again, created) = Secret::load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(again, made);
        assert_eq!(Secret::from_file(&path).unwrap(), made);
        // Another directory gets another secret.
        let (other, _) = Secret::load_or_create(&dir.join("other/secret")).unwrap();
        assert_ne!(other, made);
        // Group- or other-readable: refused with the fix in the message, never rewritten.
        for mode in [0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Secret::load_or_create(&path).unwrap_err();
            assert!(matches!(e, AuthError::Exposed { .. }), "{mode:o}: {e}");
            assert!(e.to_string().contains("chmod 600"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        // Another user's file (as root, hand it to nobody): refused.
        if rustix::process::geteuid().is_root() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let e = Secret::load_or_create(&path).unwrap_err();
            assert!(matches!(e, AuthError::Owner { owner: 65534, .. }), "{e}");
        }
        // A symbolic link in its place is not followed.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.join("other/secret"), &path).unwrap();
        assert!(matches!(
            Secret::load_or_create(&path),
            Err(AuthError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn servers_starting_together_read_the_one_secret_made() {
        let dir = std::env::temp_dir().join(format!("iosets-auth-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for round in 0..20 {
            let path = dir.join(format!("{round}/secret"));
            let start = std::sync::Barrier::new(6);
            let got: Vec<(Secret, bool)> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            Secret::load_or_create(&path)
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().unwrap().unwrap())
                    .collect()
            });
            assert_eq!(got.iter().filter(|(_, made)| *made).count(), 1, "{got:?}");
            assert!(got.iter().all(|(s, _)| *s == got[0].0));
            // Nothing but the secret is left beside it.
            let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left, ["secret"]);
        }
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
