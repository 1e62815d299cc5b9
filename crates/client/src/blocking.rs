//! The blocking client: the same operations as [`Client`], for code without an async runtime.

use std::net::SocketAddr;

use bytes::Bytes;
use iosets_proto::{Attr, Control, DirEntry, OpenFlags, Reply};
use iosets_types::{JobId, Priority};

use crate::client::{Client, WriteBuf};
use crate::config::ClientConfig;
use crate::error::ClientError;
use crate::layout::Layout;

/// A [`Client`] with a small runtime of its own (one worker thread that runs the connections'
/// reader and writer tasks); every method blocks the calling thread until the operation is
/// done. It may be shared by many threads (`&self` methods), whose operations then run
/// concurrently.
///
/// Do not create, use or drop it from inside an async runtime (tokio refuses to block there):
/// use [`Client`] there.
#[derive(Debug)]
pub struct BlockingClient {
    // Dropped before the runtime that runs its tasks.
    client: Client,
    rt: tokio::runtime::Runtime,
}

impl BlockingClient {
    /// Connects to `servers`, as [`Client::connect`].
    pub fn connect(servers: &[SocketAddr], cfg: ClientConfig) -> Result<Self, ClientError> {
        let rt = runtime()?;
        let client = rt.block_on(Client::connect(servers, cfg))?;
        Ok(BlockingClient { client, rt })
    }

    /// Connects to servers given as `host:port` strings, as [`Client::connect_to`].
    pub fn connect_to<S: AsRef<str>>(
        servers: &[S],
        cfg: ClientConfig,
    ) -> Result<Self, ClientError> {
        let rt = runtime()?;
        let client = rt.block_on(Client::connect_to(servers, cfg))?;
        Ok(BlockingClient { client, rt })
    }

    /// The asynchronous client underneath (its futures must run on this client's runtime or
    /// another tokio runtime).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The servers, in layout order.
    pub fn servers(&self) -> Vec<SocketAddr> {
        self.client.servers()
    }

    /// The striping layout.
    pub fn layout(&self) -> Layout {
        self.client.layout()
    }

    /// The job this client's requests are done for.
    pub fn job(&self) -> JobId {
        self.client.job()
    }

    /// Gives job `job` its name; see [`Client::name_job`].
    pub fn name_job(&self, job: JobId, name: &str) {
        self.client().name_job(job, name);
    }

    /// Changes the priority hint sent with the following requests.
    pub fn set_priority_hint(&self, priority: Option<Priority>) {
        self.client.set_priority_hint(priority);
    }

    /// [`Client::buffer`].
    pub fn buffer(&self, len: usize) -> WriteBuf {
        self.client.buffer(len)
    }

    /// [`Client::is_local`].
    pub fn is_local(&self, server: usize) -> bool {
        self.client.is_local(server)
    }

    /// [`Client::lookup`].
    pub fn lookup(&self, path: &str) -> Result<Attr, ClientError> {
        self.rt.block_on(self.client.lookup(path))
    }

    /// [`Client::create`].
    pub fn create(&self, path: &str, mode: u32, exclusive: bool) -> Result<Attr, ClientError> {
        self.rt.block_on(self.client.create(path, mode, exclusive))
    }

    /// [`Client::open`].
    pub fn open(&self, path: &str, flags: OpenFlags) -> Result<Attr, ClientError> {
        self.rt.block_on(self.client.open(path, flags))
    }

    /// [`Client::read_at`].
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Bytes, ClientError> {
        self.rt.block_on(self.client.read_at(path, offset, len))
    }

    /// [`Client::write_at`].
    pub fn write_at(
        &self,
        path: &str,
        offset: u64,
        data: impl Into<Bytes>,
    ) -> Result<u64, ClientError> {
        self.rt.block_on(self.client.write_at(path, offset, data))
    }

    /// [`Client::fsync`].
    pub fn fsync(&self, path: &str) -> Result<(), ClientError> {
        self.rt.block_on(self.client.fsync(path))
    }

    /// [`Client::truncate`].
    pub fn truncate(&self, path: &str, size: u64) -> Result<(), ClientError> {
        self.rt.block_on(self.client.truncate(path, size))
    }

    /// [`Client::unlink`].
    pub fn unlink(&self, path: &str) -> Result<(), ClientError> {
        self.rt.block_on(self.client.unlink(path))
    }

    /// [`Client::mkdir`].
    pub fn mkdir(&self, path: &str, mode: u32) -> Result<Attr, ClientError> {
        self.rt.block_on(self.client.mkdir(path, mode))
    }

    /// [`Client::rmdir`].
    pub fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        self.rt.block_on(self.client.rmdir(path))
    }

    /// [`Client::readdir`].
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        self.rt.block_on(self.client.readdir(path))
    }

    /// [`Client::rename`].
    pub fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        self.rt.block_on(self.client.rename(from, to))
    }

    /// [`Client::control`].
    pub fn control(&self, server: usize, token: &str, op: Control) -> Result<Reply, ClientError> {
        self.rt.block_on(self.client.control(server, token, op))
    }
}

/// One worker thread runs the connections' reader and writer tasks. (A runtime without threads,
/// the tasks running on the callers' threads, saves two thread wake-ups per request but was no
/// faster on the loopback benchmark, and moved the frames' buffers into the callers' heap where
/// glibc returned them to the kernel after every large read: TCP reads at depth 8 fell to a
/// third.)
fn runtime() -> Result<tokio::runtime::Runtime, ClientError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("iosets-client")
        .enable_all()
        .build()
        .map_err(ClientError::Runtime)
}
