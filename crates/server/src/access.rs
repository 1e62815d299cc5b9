//! Who a request acts as on the backing store, and the switch of a worker thread to that user.
//!
//! # The model
//! A client that acts for local users (the mount) puts the caller's uid, gid and supplementary
//! groups in every request ([`Creds`]), as an NFS client does with `AUTH_SYS`. A server running as
//! root does each such request **as that user**: the worker thread takes the user's ids for the
//! time of the operation (Linux credentials are per thread: `setresuid`/`setresgid`/`setgroups`
//! on the calling thread only, as knfsd and NFS-Ganesha do), so the kernel itself checks every
//! permission — search permission on every directory of the path, read and write bits and ACLs,
//! the sticky bit, who may chmod or chown — on the objects it actually resolves beneath the root.
//! Nothing is decided from a path the server looked at earlier, so a symlink or a rename in
//! between changes nothing.
//!
//! Reads, writes, fsyncs and truncates go through descriptors the server keeps open, which the
//! kernel does not check again; for those the user resolves the path (search permission) and the
//! kernel answers whether the user may read or write that very object (`faccessat2` with
//! `AT_EACCESS`), with NFS's owner override: the owner of a file may read and write it whatever
//! its mode, so that `open(O_CREAT | O_RDWR, 0)` followed by writes works as on a local file
//! system. The I/O then goes through a descriptor of that same object (checked by identity).
//!
//! What a claim becomes ([`Acting`]):
//! - uid 0 acts as the server (root passes every check, as in POSIX), unless `root_squash`
//!   is on: then it acts as `nobody` (65534:65534, no supplementary group).
//! - Any other uid acts as itself.
//! - A request **without** credentials (a client that acts for no local user: `iosets demo`,
//!   the client library, a C caller) is decided by `no_creds`: `server` (the default) acts as the
//!   server's own user, as before; `nobody` acts as 65534:65534; `refuse` answers `EACCES`. Only
//!   clients that proved the cluster secret reach a server, so `server` trusts the cluster's own
//!   services, not a node's users.
//!
//! # What it is not
//! A server that is not root cannot take other users' ids: it does every request as its own user
//! (the kernel then checks that user), whatever the claim, and says so once at start. Groups
//! beyond the first 16 are not carried (`AUTH_SYS`'s limit).

use std::cell::Cell;

use iosets_proto::{Creds, Groups};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::root::FsError;

/// The user and group `nobody` acts as (root squash, `no_creds = "nobody"`).
pub const NOBODY: u32 = 65534;

/// What a request without credentials acts as (`no_creds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoCreds {
    /// The server's own user (the behaviour before permission checks existed).
    #[default]
    Server,
    /// `nobody` (65534:65534).
    Nobody,
    /// Refused: `EACCES`.
    Refuse,
}

impl std::fmt::Display for NoCreds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoCreds::Server => "server",
            NoCreds::Nobody => "nobody",
            NoCreds::Refuse => "refuse",
        })
    }
}

impl std::str::FromStr for NoCreds {
    type Err = String;
    fn from_str(s: &str) -> Result<NoCreds, String> {
        match s {
            "server" => Ok(NoCreds::Server),
            "nobody" => Ok(NoCreds::Nobody),
            "refuse" => Ok(NoCreds::Refuse),
            _ => Err(format!(
                "no_creds = {s:?}: must be `server` (act as the server's user), `nobody` or \
                 `refuse`"
            )),
        }
    }
}

/// The ids a request acts as when it is not the server's own user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub groups: Groups,
}

impl Identity {
    fn nobody() -> Identity {
        Identity {
            uid: NOBODY,
            gid: NOBODY,
            groups: Groups::default(),
        }
    }
}

/// What a request acts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acting {
    /// The server's own user: no switch, no check of ours.
    Server,
    /// Another user: the worker thread takes these ids.
    As(Identity),
}

/// How claims are turned into identities (from the server's configuration).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    pub root_squash: bool,
    pub no_creds: NoCreds,
    /// Whether this process may take other users' ids (it runs as root).
    pub can_switch: bool,
}

impl Rules {
    /// What a request with `creds` acts as; `Err` (`EACCES`) when it is refused outright.
    pub(crate) fn acting(&self, creds: Option<Creds>) -> Result<Acting, FsError> {
        let id = match creds {
            None => match self.no_creds {
                NoCreds::Server => return Ok(Acting::Server),
                NoCreds::Nobody => Identity::nobody(),
                NoCreds::Refuse => {
                    return Err(FsError {
                        errno: Errno::ACCESS.raw_os_error(),
                        message: "a request without credentials is refused by this server \
                                  (no_creds = \"refuse\")"
                            .into(),
                    })
                }
            },
            Some(c) if c.uid == 0 && self.root_squash => Identity::nobody(),
            Some(c) if c.uid == 0 => return Ok(Acting::Server),
            Some(c) => Identity {
                uid: c.uid,
                gid: c.gid,
                groups: c.groups,
            },
        };
        Ok(if self.can_switch {
            Acting::As(id)
        } else {
            Acting::Server
        })
    }
}

/// Whether this process may take other users' ids: it runs as root (read once, before any
/// thread switched).
pub(crate) fn can_switch() -> bool {
    static ROOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ROOT.get_or_init(|| rustix::process::geteuid().is_root())
}

thread_local! {
    /// The ids this thread has taken, `None` while it is the server's own user.
    static CURRENT: Cell<Option<Identity>> = const { Cell::new(None) };
    /// The server's own ids, read when the thread first switched.
    static SERVER: Cell<Option<(Uid, Gid)>> = const { Cell::new(None) };
}

/// The server's supplementary groups, read once.
fn server_groups() -> &'static [Gid] {
    static GROUPS: std::sync::OnceLock<Vec<Gid>> = std::sync::OnceLock::new();
    GROUPS.get_or_init(|| rustix::process::getgroups().unwrap_or_default())
}

fn failed(what: &str, e: Errno) -> FsError {
    FsError {
        errno: Errno::IO.raw_os_error(),
        message: format!("cannot switch the worker thread's credentials ({what}): {e}"),
    }
}

/// Gives this thread back the server's own ids.
fn restore() -> Result<(), FsError> {
    let Some((uid, gid)) = SERVER.get() else {
        return Ok(());
    };
    // The effective uid first: the group calls need the capabilities it brings back.
    rustix::thread::set_thread_res_uid(None::<Uid>, uid, None::<Uid>)
        .map_err(|e| failed("uid", e))?;
    rustix::thread::set_thread_res_gid(None::<Gid>, gid, None::<Gid>)
        .map_err(|e| failed("gid", e))?;
    rustix::thread::set_thread_groups(server_groups()).map_err(|e| failed("groups", e))?;
    CURRENT.set(None);
    Ok(())
}

fn take(id: Identity) -> Result<(), FsError> {
    if SERVER.get().is_none() {
        SERVER.set(Some((
            rustix::process::geteuid(),
            rustix::process::getegid(),
        )));
    }
    let groups: Vec<Gid> = id
        .groups
        .as_slice()
        .iter()
        .map(|&g| Gid::from_raw(g))
        .collect();
    let r = rustix::thread::set_thread_groups(&groups)
        .map_err(|e| failed("groups", e))
        .and_then(|()| {
            rustix::thread::set_thread_res_gid(None::<Gid>, Gid::from_raw(id.gid), None::<Gid>)
                .map_err(|e| failed("gid", e))
        })
        .and_then(|()| {
            // Last: once the effective uid is not 0, the thread has no capability left.
            rustix::thread::set_thread_res_uid(None::<Uid>, Uid::from_raw(id.uid), None::<Uid>)
                .map_err(|e| failed("uid", e))
        });
    match r {
        Ok(()) => {
            CURRENT.set(Some(id));
            Ok(())
        }
        Err(e) => {
            // Half switched: never serve anything so.
            CURRENT.set(Some(id));
            restore()?;
            Err(e)
        }
    }
}

/// Makes this thread act as `acting` (nothing to do if it already does).
pub(crate) fn enter(acting: Acting) -> Result<(), FsError> {
    let want = match acting {
        Acting::Server => None,
        Acting::As(id) => Some(id),
    };
    if CURRENT.get() == want {
        return Ok(());
    }
    if CURRENT.get().is_some() {
        restore()?;
    }
    match want {
        None => Ok(()),
        Some(id) => take(id),
    }
}

/// The user this thread acts as, `None` for the server's own user.
pub(crate) fn current() -> Option<Identity> {
    CURRENT.get()
}

/// Runs `f` as the server's own user, then returns to the thread's user: for what the server
/// does for itself (descriptors it keeps, fsyncs at shutdown, the stripe-count attribute), never
/// for what the user asked to read or change.
pub(crate) fn as_server<T>(f: impl FnOnce() -> Result<T, FsError>) -> Result<T, FsError> {
    let Some(id) = CURRENT.get() else {
        return f();
    };
    restore()?;
    let r = f();
    take(id)?;
    r
}

/// What a data request needs of the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    Read,
    Write,
    /// Read or write (fsync: any open descriptor may be fsynced).
    Either,
}

/// Whether the user this thread acts as may do `want` to the object `fd` (`O_PATH`) with
/// attributes `st`: the kernel's answer (mode bits, groups, ACLs, `faccessat2` with
/// `AT_EACCESS`), or the owner (NFS's owner override).
pub(crate) fn may(
    fd: &std::os::fd::OwnedFd,
    st: &rustix::fs::Stat,
    want: Want,
    path: &str,
) -> Result<(), FsError> {
    let Some(id) = CURRENT.get() else {
        return Ok(());
    };
    if st.st_uid == id.uid {
        return Ok(());
    }
    use rustix::fs::{Access, AtFlags};
    // The object itself, through its descriptor's /proc link (the kernel follows it to that
    // very inode); AT_EACCESS: checked with the thread's effective ids, the user's.
    use std::os::fd::AsRawFd;
    let at = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let ok = |a: Access| rustix::fs::accessat(rustix::fs::CWD, at.as_str(), a, AtFlags::EACCESS);
    let r = match want {
        Want::Read => ok(Access::READ_OK),
        Want::Write => ok(Access::WRITE_OK),
        Want::Either => ok(Access::READ_OK).or_else(|_| ok(Access::WRITE_OK)),
    };
    r.map_err(|e| FsError {
        errno: e.raw_os_error(),
        message: format!(
            "{} {path:?} as uid {}: {}",
            match want {
                Want::Read => "read",
                Want::Write => "write",
                Want::Either => "use",
            },
            id.uid,
            std::io::Error::from_raw_os_error(e.raw_os_error())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(root_squash: bool, no_creds: NoCreds) -> Rules {
        Rules {
            root_squash,
            no_creds,
            can_switch: true,
        }
    }

    #[test]
    fn claims_become_identities() {
        let user = Creds {
            uid: 1000,
            gid: 100,
            groups: Groups::new(&[100, 27]),
        };
        let r = rules(false, NoCreds::Server);
        assert_eq!(r.acting(Some(Creds::new(0, 0))).unwrap(), Acting::Server);
        assert_eq!(
            r.acting(Some(user)).unwrap(),
            Acting::As(Identity {
                uid: 1000,
                gid: 100,
                groups: Groups::new(&[100, 27])
            })
        );
        assert_eq!(r.acting(None).unwrap(), Acting::Server);
        let squash = rules(true, NoCreds::Nobody);
        assert_eq!(
            squash.acting(Some(Creds::new(0, 5))).unwrap(),
            Acting::As(Identity::nobody())
        );
        assert_eq!(squash.acting(None).unwrap(), Acting::As(Identity::nobody()));
        let e = rules(false, NoCreds::Refuse).acting(None).unwrap_err();
        assert_eq!(e.errno, Errno::ACCESS.raw_os_error());
        assert!(e.message.contains("no_creds"), "{}", e.message);
        let cannot = Rules {
            can_switch: false,
            ..rules(true, NoCreds::Nobody)
        };
        assert_eq!(cannot.acting(Some(user)).unwrap(), Acting::Server);
    }

    #[test]
    fn no_creds_values_parse_and_print() {
        for v in ["server", "nobody", "refuse"] {
            assert_eq!(v.parse::<NoCreds>().unwrap().to_string(), v);
        }
        let e = "root".parse::<NoCreds>().unwrap_err();
        assert!(e.contains("`server`"), "{e}");
    }
}
