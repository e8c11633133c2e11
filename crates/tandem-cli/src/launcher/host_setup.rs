//! What the launcher prepares once per host for the ranks it starts there
//! (the master for its own host, `tandem _host` for the others): the
//! shared-memory segment, and variables every rank of the host gets.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use tandem::bootstrap::env as job_env;
use tandem::dynamic::SpawnApp;
use tandem::params::Settings;
use tandem::transport::shm::{env as shm_env, HostResources, Layout};

use super::supervise::{self, App};

/// The shared-memory segment and wake-up descriptors for a host's ranks,
/// when the job's parameters ask for the shm transport.
pub fn shared_memory(
    local_size: u32,
    settings: &Settings,
) -> Result<Option<HostResources>, String> {
    let wants_shm = settings
        .text("transports")
        .split(',')
        .any(|t| t.trim() == "shm");
    if !wants_shm || local_size < 2 {
        return Ok(None);
    }
    let layout = Layout::from_settings(local_size, settings)?;
    HostResources::create(layout)
        .map(Some)
        .map_err(|e| format!("cannot create the shared-memory segment: {e}"))
}

const TUNABLES: &str = "GLIBC_TUNABLES";
const RSEQ_TUNABLE: &str = "glibc.pthread.rseq";

/// `GLIBC_TUNABLES` for the ranks of a host when parameter `rseq` turns
/// glibc's rseq registration off there (`auto`: the host has more ranks
/// than CPUs). Ranks that wait then take turns on the CPUs, and at every
/// switch the kernel rewrites the registered area of the rank it resumes.
/// `env` is what the ranks get on top of the launcher's own environment;
/// a value that already names the tunable is the user's choice and stays.
pub fn rseq_tunables(
    settings: &Settings,
    local_size: u32,
    env: &[(String, String)],
) -> Option<(String, String)> {
    let off = match settings.text("rseq") {
        "off" => true,
        "auto" => local_size as usize > usable_cpus(),
        _ => false,
    };
    if !off {
        return None;
    }
    let inherited = env
        .iter()
        .rev()
        .find(|(k, _)| k == TUNABLES)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(TUNABLES).ok())
        .unwrap_or_default();
    with_rseq_off(&inherited).map(|v| (TUNABLES.to_string(), v))
}

/// `tunables` (glibc's `name=value:name=value` list) with rseq turned off;
/// `None` when it already says what to do with rseq.
fn with_rseq_off(tunables: &str) -> Option<String> {
    let named = tunables
        .split(':')
        .any(|t| t.split('=').next() == Some(RSEQ_TUNABLE));
    if named {
        None
    } else if tunables.is_empty() {
        Some(format!("{RSEQ_TUNABLE}=0"))
    } else {
        Some(format!("{tunables}:{RSEQ_TUNABLE}=0"))
    }
}

/// CPUs the ranks may run on (they inherit the launcher's affinity); the
/// ranks count theirs the same way.
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Where a process of a spawned world stands: its world (`total`
/// processes from process `base`), the spawn that made it (`spawn`, the
/// parents' `root` and group size `parents`), and its place on its host.
pub struct SpawnedPlace<'a> {
    pub base: u32,
    pub total: u32,
    pub spawn: u32,
    pub root: u32,
    pub parents: u32,
    pub local: u32,
    pub local_size: u32,
    pub shm: Option<&'a HostResources>,
}

/// The program and variables of world rank `rank` of a spawned world: the
/// apps take the ranks in turn. `None` if `rank` is beyond them.
pub fn spawned_process(
    apps: &[SpawnApp],
    rank: u32,
    at: &SpawnedPlace<'_>,
) -> Option<(App, Vec<(String, String)>)> {
    let mut first = 0u32;
    let (appnum, a) = apps.iter().enumerate().find(|(_, a)| {
        first = first.saturating_add(a.procs);
        rank < first
    })?;
    let app = App {
        ranks: a.procs,
        program: OsStr::from_bytes(&a.command).to_os_string(),
        args: a
            .args
            .iter()
            .map(|w| OsStr::from_bytes(w).to_os_string())
            .collect(),
        wdir: a.wdir.as_ref().map(|w| OsStr::from_bytes(w).to_os_string()),
    };
    let mut env = vec![
        (job_env::RANK.to_string(), rank.to_string()),
        (job_env::SIZE.to_string(), at.total.to_string()),
        (job_env::LOCAL_SIZE.to_string(), at.local_size.to_string()),
        (job_env::WORLD_BASE.to_string(), at.base.to_string()),
        (
            job_env::PARENT.to_string(),
            format!("{}:{}:{}", at.spawn, at.root, at.parents),
        ),
        (job_env::APPNUM.to_string(), appnum.to_string()),
    ];
    match at.shm {
        Some(h) => env.extend(h.env(at.local)),
        None => env.push((shm_env::LOCAL_RANK.to_string(), at.local.to_string())),
    }
    env.extend(supervise::conventional_env(
        rank,
        at.total,
        at.local,
        at.local_size,
    ));
    Some((app, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rseq: &str) -> Settings {
        Settings::from_vars(vec![("TANDEM_RSEQ".to_string(), rseq.to_string())]).unwrap()
    }

    #[test]
    fn rseq_is_turned_off_where_asked_and_other_tunables_kept() {
        let many = usable_cpus() as u32 + 1;
        let none: &[(String, String)] = &[];
        assert_eq!(rseq_tunables(&settings("keep"), many, none), None);
        assert_eq!(rseq_tunables(&settings("auto"), 1, none), None);
        let env = [(TUNABLES.to_string(), "glibc.malloc.arena_max=2".to_string())];
        let expect = Some((
            TUNABLES.to_string(),
            "glibc.malloc.arena_max=2:glibc.pthread.rseq=0".to_string(),
        ));
        assert_eq!(rseq_tunables(&settings("auto"), many, &env), expect);
        assert_eq!(rseq_tunables(&settings("off"), 1, &env), expect);
        // The user's own word on rseq wins.
        let own = [(TUNABLES.to_string(), "glibc.pthread.rseq=1".to_string())];
        assert_eq!(rseq_tunables(&settings("off"), many, &own), None);
        assert_eq!(with_rseq_off(""), Some("glibc.pthread.rseq=0".to_string()));
        assert_eq!(
            with_rseq_off("glibc.pthread.rseq_x=1").as_deref(),
            Some("glibc.pthread.rseq_x=1:glibc.pthread.rseq=0")
        );
    }
}
