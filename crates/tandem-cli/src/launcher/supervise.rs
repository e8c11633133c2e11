//! Starting rank processes and learning how they ended.
//!
//! Each rank runs in its own process group (so a signal reaches everything
//! it started) and dies with SIGKILL if the launcher goes away.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::signals::signal_name;
use tandem::bootstrap::env as job_env;

/// One program of the job: `tandem run -n 2 ./a : -n 3 ./b` (MPMD) has
/// two, and its ranks take them in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct App {
    /// How many ranks run it (the last program runs the rest).
    pub ranks: u32,
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The directory its processes start in (`None`: the launcher's).
    pub wdir: Option<OsString>,
}

/// What is needed to start every rank of the job.
pub struct RankCommand {
    /// At least one.
    pub apps: Vec<App>,
    /// Variables added to the launcher's environment (same for every rank).
    pub env: Vec<(String, String)>,
    /// Variables removed from the launcher's environment.
    pub env_remove: Vec<String>,
    /// The launcher's descriptor limit before it raised it, for the children.
    pub original_fd_limit: Option<libc::rlimit>,
    /// The job's secret, handed to each rank through a pipe rather than
    /// its environment (empty: none).
    pub secret: String,
}

/// A started rank: its pid (also its process group id) and our pipe ends.
pub struct SpawnedRank {
    pub pid: libc::pid_t,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl RankCommand {
    /// The program rank `rank` of the program runs, and its number
    /// (`MPI_APPNUM`).
    pub fn app_of(&self, rank: u32) -> (usize, &App) {
        app_of(&self.apps, rank)
    }
}

/// The program of `rank` among `apps`, and its number.
pub fn app_of(apps: &[App], rank: u32) -> (usize, &App) {
    let mut first = 0u32;
    for (i, app) in apps.iter().enumerate() {
        first = first.saturating_add(app.ranks);
        if rank < first || i + 1 == apps.len() {
            return (i, app);
        }
    }
    unreachable!("a job has at least one program")
}

/// Starts one rank, of `app`; `rank_env` are its own variables (rank
/// number).
pub fn spawn_rank(
    cmd: &RankCommand,
    app: &App,
    rank_env: &[(String, String)],
    with_stdin: bool,
) -> io::Result<SpawnedRank> {
    let mut command = Command::new(&app.program);
    command.args(&app.args);
    if let Some(dir) = &app.wdir {
        command.current_dir(dir);
    }
    let secret = if cmd.secret.is_empty() {
        None
    } else {
        let fd = secret_pipe(&cmd.secret)?;
        command.env(job_env::SECRET_FD, fd.as_raw_fd().to_string());
        Some(fd)
    };
    let secret_fd = secret.as_ref().map(|f| f.as_raw_fd());
    for name in &cmd.env_remove {
        command.env_remove(name);
    }
    command.envs(cmd.env.iter().map(|(k, v)| (k, v)));
    command.envs(rank_env.iter().map(|(k, v)| (k, v)));
    command
        .stdin(if with_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let launcher_pid = std::process::id() as libc::pid_t;
    let fd_limit = cmd.original_fd_limit;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (fcntl on the secret's pipe, which
    // stays open until after spawn; sigprocmask, prctl, getppid, setrlimit);
    // it neither allocates nor takes locks.
    unsafe {
        command.pre_exec(move || {
            if let Some(fd) = secret_fd {
                // The secret's pipe stays open across exec for the rank only.
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            prepare_child(launcher_pid, fd_limit, libc::SIGKILL)
        });
    }
    let mut child = command.spawn()?;
    // Our end of the secret's pipe goes (the child has its own).
    drop(secret);
    let spawned = SpawnedRank {
        pid: child.id() as libc::pid_t,
        stdin: child.stdin.take().map(OwnedFd::from),
        stdout: OwnedFd::from(child.stdout.take().expect("stdout is piped")),
        stderr: OwnedFd::from(child.stderr.take().expect("stderr is piped")),
    };
    // Dropping `child` neither kills nor waits; we reap by pid ourselves.
    drop(child);
    Ok(spawned)
}

/// A pipe (close-on-exec) holding `secret`, its write end closed: the
/// read end, which a rank reads the secret from and closes.
fn secret_pipe(secret: &str) -> io::Result<OwnedFd> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 returns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just created both descriptors and nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // 64 bytes fit in any pipe's buffer: the write does not block.
    let mut w = std::fs::File::from(write);
    std::io::Write::write_all(&mut w, secret.as_bytes())?;
    Ok(read)
}

/// A started agent (`ssh HOST tandem _host ...`): its pid (and process
/// group) and our ends of its stdin, stdout and stderr.
pub struct SpawnedAgent {
    pub pid: libc::pid_t,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Starts an agent command in its own process group. It gets SIGTERM if the
/// launcher dies (ssh then closes the remote helper's stdin, which makes the
/// helper kill its ranks; a helper started directly handles SIGTERM itself).
pub fn spawn_agent(argv: &[OsString]) -> io::Result<SpawnedAgent> {
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let launcher_pid = std::process::id() as libc::pid_t;
    // SAFETY: as in `spawn_rank`: only async-signal-safe calls before exec.
    unsafe {
        command.pre_exec(move || prepare_child(launcher_pid, None, libc::SIGTERM));
    }
    let mut child = command.spawn()?;
    let spawned = SpawnedAgent {
        pid: child.id() as libc::pid_t,
        stdin: OwnedFd::from(child.stdin.take().expect("stdin is piped")),
        stdout: OwnedFd::from(child.stdout.take().expect("stdout is piped")),
        stderr: OwnedFd::from(child.stderr.take().expect("stderr is piped")),
    };
    drop(child);
    Ok(spawned)
}

/// Runs in the child between fork and exec: undoes what the launcher
/// changed for itself, and ties the child's life to the launcher's
/// (`death_signal` when the launcher dies).
fn prepare_child(
    launcher_pid: libc::pid_t,
    fd_limit: Option<libc::rlimit>,
    death_signal: libc::c_int,
) -> io::Result<()> {
    // The launcher blocks the signals it reads from its signalfd; a rank
    // must start with none blocked (std's Command does not reset the mask).
    // SAFETY: sigset_t is plain data; all-zero is a valid value.
    let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is a valid sigset_t; sigemptyset and sigprocmask are
    // async-signal-safe; a null old-set pointer is allowed.
    unsafe {
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let signal = death_signal as libc::c_ulong;
    // SAFETY: prctl(PR_SET_PDEATHSIG) only changes this process's attributes.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The launcher may have died before the prctl took effect; then nobody
    // would send the signal, so give up now.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != launcher_pid {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    if let Some(lim) = fd_limit {
        // SAFETY: `lim` is a valid rlimit; failure just keeps the raised limit.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    Ok(())
}

/// How a rank process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Killed {
        signal: i32,
        core_dumped: bool,
    },
    /// waitid reported something other than an exit or a kill.
    Unknown,
}

impl Termination {
    /// The launcher's exit status when this ends the job.
    pub fn exit_code(self) -> i32 {
        match self {
            Termination::Exited(c) if c != 0 => c,
            Termination::Killed { signal, .. } => 128 + signal,
            _ => 1,
        }
    }

    /// "exited with status 3", "was killed by signal 9 (SIGKILL)".
    pub fn describe(self) -> String {
        match self {
            Termination::Exited(c) => format!("exited with status {c}"),
            Termination::Killed {
                signal,
                core_dumped,
            } => format!(
                "was killed by signal {signal} ({}){}",
                signal_name(signal),
                if core_dumped { ", core dumped" } else { "" }
            ),
            Termination::Unknown => "ended for an unknown reason".to_string(),
        }
    }
}

/// Makes orphaned descendants of the ranks (say, a rank's background job
/// whose shell was killed) children of the launcher, so it can reap and, at
/// the end, kill them instead of leaving them to init.
pub fn become_subreaper() {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) only changes this process's
    // attributes. If it fails we merely lose the clean-up of orphans.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// A child that has ended, found without reaping it: while the zombie
/// exists its process group id cannot be reused, so the group can still be
/// signalled safely. Call [`reap`] on it before asking again.
pub fn peek_exited_child() -> Option<(libc::pid_t, Termination)> {
    loop {
        // SAFETY: siginfo_t is plain data; all-zero is valid and makes si_pid 0
        // when no child has changed state.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for writes; waitid only fills it in.
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc != 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return None; // ECHILD: no children at all
        }
        // SAFETY: waitid succeeded, so `info` holds SIGCHLD data (or zeros).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return None;
        }
        let how = match info.si_code {
            libc::CLD_EXITED => Termination::Exited(status),
            libc::CLD_KILLED => Termination::Killed {
                signal: status,
                core_dumped: false,
            },
            libc::CLD_DUMPED => Termination::Killed {
                signal: status,
                core_dumped: true,
            },
            _ => Termination::Unknown,
        };
        return Some((pid, how));
    }
}

/// The launcher's live children (ranks and adopted orphans).
pub fn children() -> Vec<libc::pid_t> {
    let pid = std::process::id();
    // The launcher is single-threaded, so its only task has the process id.
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Reaps a process that [`peek_exited_child`] reported as ended.
pub fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: `status` is valid for writes; WNOHANG keeps this from blocking.
    while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
}

/// What other MPI launchers tell each process, for the wrapper scripts that
/// pick a GPU or a CPU by it: Open MPI's `OMPI_COMM_WORLD_*`, the process
/// management interface's `PMI_RANK`/`PMI_SIZE`, MPICH's and Intel MPI's
/// `MPI_LOCALRANKID`/`MPI_LOCALNRANKS`. `rank` of `size` is the program's
/// rank (a replica's is its rank's), `local` of `local_size` the process's
/// place among those of its host. A program built against one of those
/// libraries is refused before it starts (foreign_mpi.rs), so none takes
/// these for its own launcher's.
pub fn conventional_env(
    rank: u32,
    size: u32,
    local: u32,
    local_size: u32,
) -> Vec<(String, String)> {
    let (rank, size, local, local_size) = (
        rank.to_string(),
        size.to_string(),
        local.to_string(),
        local_size.to_string(),
    );
    [
        ("OMPI_COMM_WORLD_RANK", &rank),
        ("OMPI_COMM_WORLD_SIZE", &size),
        ("OMPI_COMM_WORLD_LOCAL_RANK", &local),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", &local_size),
        ("PMI_RANK", &rank),
        ("PMI_SIZE", &size),
        ("MPI_LOCALRANKID", &local),
        ("MPI_LOCALNRANKS", &local_size),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.clone()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(Termination::Exited(3).exit_code(), 3);
        assert_eq!(Termination::Exited(0).exit_code(), 1);
        let killed = Termination::Killed {
            signal: 9,
            core_dumped: false,
        };
        assert_eq!(killed.exit_code(), 137);
        assert_eq!(killed.describe(), "was killed by signal 9 (SIGKILL)");
    }
}
