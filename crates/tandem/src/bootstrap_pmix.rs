//! The client side of PMIx, the process-management interface of Slurm's
//! `srun --mpi=pmix`, PRRTE's `prterun` and Open MPI's `mpirun`: ranks
//! they start learn their rank, the job's size and shape, and exchange
//! their addresses through the PMIx server of their node.
//!
//! Through the OpenPMIx client library, loaded when a PMIx server started
//! the process (`dlopen("libpmix.so.2")`), so that Tandem builds and runs
//! where the library is absent. Only the calls below are used, with the
//! structures of the PMIx standard's C ABI (`pmix_proc_t`,
//! `pmix_value_t`, `pmix_info_t`), whose layout the tests check against
//! the library's header where it is installed.
//!
//! Keys are published globally, and a key names the rank that published
//! it (`tcp.3` is rank 3's; a key without a rank is rank 0's), since a
//! PMIx lookup asks one process for its key.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use crate::error::{Error, ErrorClass};

fn err(msg: impl Into<String>) -> Error {
    Error::new(ErrorClass::Other, format!("PMIx: {}", msg.into()))
}

/// `pmix_proc_t`: a namespace (the job) and a rank in it.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; 256],
    rank: u32,
}

/// `pmix_value_t`'s data, as far as Tandem reads it (the union is 24
/// bytes, 8-aligned).
#[repr(C)]
#[derive(Clone, Copy)]
union Data {
    flag: bool,
    string: *mut c_char,
    uint16: u16,
    uint32: u32,
    size: [u64; 3],
}

/// `pmix_value_t`.
#[repr(C)]
struct Value {
    kind: u16,
    data: Data,
}

/// `pmix_info_t`.
#[repr(C)]
struct Info {
    key: [c_char; 512],
    flags: u32,
    value: Value,
}

const RANK_WILDCARD: u32 = u32::MAX - 1;
const KIND_BOOL: u16 = 1;
const KIND_STRING: u16 = 3;
const KIND_UINT16: u16 = 13;
const KIND_UINT32: u16 = 14;
const SCOPE_GLOBAL: u8 = 3;
const ERR_NOT_FOUND: c_int = -46;

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type DestructFn = unsafe extern "C" fn(*mut Value);

/// The library's entry points.
struct Lib {
    init: InitFn,
    finalize: FinalizeFn,
    abort: AbortFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    destruct: DestructFn,
}

impl Lib {
    /// Loads libpmix (kept loaded for the life of the process: the
    /// library starts threads of its own).
    fn load() -> Result<Lib, Error> {
        const NAMES: [&CStr; 2] = [c"libpmix.so.2", c"libpmix.so"];
        let mut handle = std::ptr::null_mut();
        for name in NAMES {
            // SAFETY: dlopen with a NUL-terminated name; RTLD_GLOBAL so the
            // plugins libpmix loads find its symbols.
            handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if !handle.is_null() {
                break;
            }
        }
        if handle.is_null() {
            return Err(err(
                "started by a PMIx server, but the OpenPMIx client library (libpmix.so.2) is not \
                 installed here (Debian: apt-get install libpmix2); or start the job with \
                 `tandem run`",
            ));
        }
        let symbol = |name: &CStr| -> Result<*mut c_void, Error> {
            // SAFETY: a valid handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if p.is_null() {
                Err(err(format!("libpmix lacks {}", name.to_string_lossy())))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the PMIx function of that name, whose C
        // signature the type spells (the PMIx standard's).
        unsafe {
            Ok(Lib {
                init: std::mem::transmute::<*mut c_void, InitFn>(symbol(c"PMIx_Init")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(symbol(c"PMIx_Finalize")?),
                abort: std::mem::transmute::<*mut c_void, AbortFn>(symbol(c"PMIx_Abort")?),
                put: std::mem::transmute::<*mut c_void, PutFn>(symbol(c"PMIx_Put")?),
                commit: std::mem::transmute::<*mut c_void, CommitFn>(symbol(c"PMIx_Commit")?),
                fence: std::mem::transmute::<*mut c_void, FenceFn>(symbol(c"PMIx_Fence")?),
                get: std::mem::transmute::<*mut c_void, GetFn>(symbol(c"PMIx_Get")?),
                destruct: std::mem::transmute::<*mut c_void, DestructFn>(symbol(
                    c"PMIx_Value_destruct",
                )?),
            })
        }
    }
}

/// A connection to the node's PMIx server.
pub struct Client {
    lib: Lib,
    me: Proc,
    pub rank: u32,
    pub size: u32,
    /// Processes of the job on this node.
    pub local_size: u32,
    /// This process's index among them.
    pub local_rank: u32,
    /// The lowest rank on this node (`None` when the server does not list
    /// the node's ranks: then nobody shares memory).
    pub node_leader: Option<u32>,
    /// Nodes the job spans.
    pub nodes: u32,
    pub appnum: u32,
    finalized: bool,
}

// SAFETY: the client is used by one thread at a time (behind the master
// link's lock); libpmix's calls are thread-safe.
unsafe impl Send for Client {}

/// What a lookup found.
enum Found {
    Text(String),
    Number(u32),
}

impl Client {
    /// `None` unless a PMIx server started this process (`PMIX_RANK` and
    /// `PMIX_NAMESPACE` are set).
    pub fn from_env() -> Option<Result<Client, Error>> {
        std::env::var_os("PMIX_RANK")?;
        std::env::var_os("PMIX_NAMESPACE")?;
        Some(Self::connect())
    }

    fn connect() -> Result<Client, Error> {
        let lib = Lib::load()?;
        let mut me = Proc {
            nspace: [0; 256],
            rank: 0,
        };
        // SAFETY: `me` is a pmix_proc_t the call fills; no info.
        let rc = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
        if rc != 0 {
            return Err(err(format!(
                "PMIx_Init failed ({rc}): the server that started this process cannot be reached"
            )));
        }
        let mut client = Client {
            lib,
            me,
            rank: me.rank,
            size: 0,
            local_size: 1,
            local_rank: 0,
            node_leader: None,
            nodes: 1,
            appnum: 0,
            finalized: false,
        };
        let job = Proc {
            rank: RANK_WILDCARD,
            ..me
        };
        let number = |c: &Client, of: &Proc, key: &CStr| match c.lookup(of, key) {
            Ok(Some(Found::Number(n))) => Some(n),
            _ => None,
        };
        client.size = number(&client, &job, c"pmix.job.size")
            .ok_or_else(|| err("the server gave no job size (pmix.job.size)"))?;
        if client.size == 0 || client.rank >= client.size {
            return Err(err(format!(
                "the server gave rank {} of {}",
                client.rank, client.size
            )));
        }
        client.local_size = number(&client, &job, c"pmix.local.size")
            .unwrap_or(1)
            .max(1);
        client.nodes = number(&client, &job, c"pmix.num.nodes").unwrap_or(1).max(1);
        client.appnum = number(&client, &me, c"pmix.appnum").unwrap_or(0);
        client.local_rank = number(&client, &me, c"pmix.lrank").unwrap_or(0);
        if let Ok(Some(Found::Text(peers))) = client.lookup(&job, c"pmix.lpeers") {
            client.node_leader = peers
                .split(',')
                .filter_map(|r| r.trim().parse::<u32>().ok())
                .min();
        }
        if client.local_rank >= client.local_size {
            return Err(err(format!(
                "the server gave local rank {} of {}",
                client.local_rank, client.local_size
            )));
        }
        Ok(client)
    }

    /// The job's name (its PMIx namespace).
    pub fn namespace(&self) -> String {
        // SAFETY: PMIx_Init wrote a NUL-terminated name into the array
        // (of which the last byte stays 0 from our initialisation).
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// `key` of process `of`: a string, or an unsigned number.
    fn lookup(&self, of: &Proc, key: &CStr) -> Result<Option<Found>, Error> {
        let mut v: *mut Value = std::ptr::null_mut();
        // SAFETY: valid proc and key; the library allocates `*v`.
        let rc = unsafe { (self.lib.get)(of, key.as_ptr(), std::ptr::null(), 0, &mut v) };
        if rc == ERR_NOT_FOUND || (rc == 0 && v.is_null()) {
            return Ok(None);
        }
        if rc != 0 {
            return Err(err(format!(
                "PMIx_Get({}) failed ({rc})",
                key.to_string_lossy()
            )));
        }
        // SAFETY: `v` is the value the library allocated; its data is read
        // as its type says, then it is destructed and freed as
        // PMIX_VALUE_RELEASE does.
        unsafe {
            let found = match (*v).kind {
                KIND_STRING if !(*v).data.string.is_null() => Some(Found::Text(
                    CStr::from_ptr((*v).data.string)
                        .to_string_lossy()
                        .into_owned(),
                )),
                KIND_UINT32 => Some(Found::Number((*v).data.uint32)),
                KIND_UINT16 => Some(Found::Number(u32::from((*v).data.uint16))),
                _ => None,
            };
            (self.lib.destruct)(v);
            libc::free(v.cast());
            Ok(found)
        }
    }
}

impl super::ProcessManager for Client {
    /// Publishes `key = value` for every process of the job (after the
    /// next fence).
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let key_c = CString::new(key).map_err(|_| err("a key with a NUL byte"))?;
        let value_c = CString::new(value).map_err(|_| err("a value with a NUL byte"))?;
        let mut v = Value {
            kind: KIND_STRING,
            data: Data {
                string: value_c.as_ptr().cast_mut(),
            },
        };
        // SAFETY: valid key and value; the library copies the string.
        let rc = unsafe { (self.lib.put)(SCOPE_GLOBAL, key_c.as_ptr(), &mut v) };
        if rc != 0 {
            return Err(err(format!("PMIx_Put({key}) failed ({rc})")));
        }
        Ok(())
    }

    /// Commits what this process put and waits for every process of the
    /// job, collecting everyone's data.
    fn fence(&mut self) -> Result<(), Error> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.lib.commit)() };
        if rc != 0 {
            return Err(err(format!("PMIx_Commit failed ({rc})")));
        }
        let mut collect = Info {
            key: [0; 512],
            flags: 0,
            value: Value {
                kind: KIND_BOOL,
                data: Data { flag: true },
            },
        };
        for (d, s) in collect.key.iter_mut().zip(c"pmix.collect".to_bytes()) {
            *d = *s as c_char;
        }
        // SAFETY: no procs (the whole job), one valid info.
        let rc = unsafe { (self.lib.fence)(std::ptr::null(), 0, &collect, 1) };
        if rc != 0 {
            return Err(err(format!("PMIx_Fence failed ({rc})")));
        }
        Ok(())
    }

    /// A key published before the last fence, by the rank the key names.
    fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        let owner = key
            .rsplit_once('.')
            .and_then(|(_, r)| r.parse::<u32>().ok())
            .unwrap_or(0);
        let of = Proc {
            rank: owner,
            ..self.me
        };
        let key_c = CString::new(key).map_err(|_| err("a key with a NUL byte"))?;
        match self.lookup(&of, &key_c)? {
            Some(Found::Text(t)) => Ok(Some(t)),
            Some(Found::Number(n)) => Ok(Some(n.to_string())),
            None => Ok(None),
        }
    }

    /// Says this process is done with the server.
    fn finalize(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        // SAFETY: no info.
        let rc = unsafe { (self.lib.finalize)(std::ptr::null(), 0) };
        if rc != 0 {
            return Err(err(format!("PMIx_Finalize failed ({rc})")));
        }
        Ok(())
    }

    /// Asks the server to end the job.
    fn abort(&mut self, code: i32, message: &str) {
        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a valid message; no procs (the whole job).
        unsafe { (self.lib.abort)(code, text.as_ptr(), std::ptr::null_mut(), 0) };
    }
    fn fd(&self) -> std::os::fd::RawFd {
        // The server is the library's business.
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The structures match the PMIx C ABI (as the OpenPMIx 4 header lays
    /// them out on x86-64 and aarch64 Linux).
    #[test]
    fn structures_have_the_c_layout() {
        assert_eq!(std::mem::size_of::<Proc>(), 260);
        assert_eq!(std::mem::offset_of!(Proc, rank), 256);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::offset_of!(Value, data), 8);
        assert_eq!(std::mem::size_of::<Info>(), 552);
        assert_eq!(std::mem::offset_of!(Info, flags), 512);
        assert_eq!(std::mem::offset_of!(Info, value), 520);
    }
}
