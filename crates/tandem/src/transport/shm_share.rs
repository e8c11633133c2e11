//! Handing a host's shared-memory descriptors (the segment and the
//! wake-up eventfds) to its ranks when no launcher of Tandem's started
//! them, as under a PMIx server: the host's first rank makes them and
//! serves them over a Unix socket in the abstract namespace (the host's
//! network namespace), passing the descriptors with `SCM_RIGHTS`. A rank
//! proves it belongs to the job with the job secret before it gets them.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

use super::shm::HostResources;
use crate::bootstrap::{secrets_equal, SECRET_BYTES};

/// Descriptors per message (the kernel takes at most 253).
const FDS_PER_MESSAGE: usize = 250;

fn address(name: &str) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

/// Starts listening for the host's other ranks under `name` (unique to
/// the job and host).
pub fn listen(name: &str) -> io::Result<UnixListener> {
    let listener = UnixListener::bind_addr(&address(name)?)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves the descriptors of `host` to `peers` ranks that present
/// `secret`, before `deadline`.
pub fn serve(
    host: &HostResources,
    listener: &UnixListener,
    peers: u32,
    secret: &[u8; SECRET_BYTES],
    deadline: Instant,
) -> io::Result<()> {
    let (segment, wake) = host.descriptors();
    let fds: Vec<RawFd> = std::iter::once(segment).chain(wake).collect();
    let mut served = 0;
    while served < peers {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(Duration::from_secs(10)))?;
                let mut presented = [0u8; SECRET_BYTES];
                if stream.read_exact(&mut presented).is_err() || !secrets_equal(&presented, secret)
                {
                    // A stranger: nothing for it.
                    continue;
                }
                for chunk in fds.chunks(FDS_PER_MESSAGE) {
                    send_fds(&stream, chunk)?;
                }
                served += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{} of {peers} ranks of this host came for it", served),
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fetches the host's descriptors from its first rank (listening under
/// `name`): the segment and `wake` eventfds.
pub fn fetch(
    name: &str,
    secret: &[u8; SECRET_BYTES],
    wake: usize,
    deadline: Instant,
) -> io::Result<(OwnedFd, Vec<OwnedFd>)> {
    let mut stream = loop {
        match UnixStream::connect_addr(&address(name)?) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    stream.set_read_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    ))?;
    stream.write_all(secret)?;
    let mut got: Vec<OwnedFd> = Vec::with_capacity(1 + wake);
    while got.len() < 1 + wake {
        let want = (1 + wake - got.len()).min(FDS_PER_MESSAGE);
        let fds = recv_fds(&stream, want)?;
        if fds.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the host's first rank sent no descriptors",
            ));
        }
        got.extend(fds);
    }
    let mut it = got.into_iter();
    let segment = it.next().expect("at least one descriptor");
    Ok((segment, it.collect()))
}

/// The buffers of a one-byte message with room for `fds` descriptors.
struct Buffers {
    byte: [u8; 1],
    control: Vec<u64>,
    space: usize,
}

impl Buffers {
    fn new(fds: usize) -> Buffers {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) };
        Buffers {
            byte: [0],
            control: vec![0u64; (space as usize).div_ceil(8)],
            space: space as usize,
        }
    }

    /// A message header over these buffers and `iov`, which must point at
    /// `byte` (both must outlive the header's use).
    fn header(&mut self, iov: &mut libc::iovec) -> libc::msghdr {
        iov.iov_base = self.byte.as_mut_ptr().cast();
        iov.iov_len = 1;
        // SAFETY: an all-zero msghdr is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.control.as_mut_ptr().cast();
        msg.msg_controllen = self.space as _;
        msg
    }
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

/// Sends one byte with `fds` attached.
fn send_fds(stream: &UnixStream, fds: &[RawFd]) -> io::Result<()> {
    let bytes = std::mem::size_of_val(fds);
    let mut buffers = Buffers::new(fds.len());
    let mut iov = empty_iovec();
    let msg = buffers.header(&mut iov);
    // SAFETY: the header points at live buffers of the lengths it gives;
    // the control buffer is 8-aligned and CMSG_SPACE bytes long, so the
    // first control header and its data fit.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr(),
            libc::CMSG_DATA(cmsg).cast::<RawFd>(),
            fds.len(),
        );
        if libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives one byte and up to `max` descriptors attached to it.
fn recv_fds(stream: &UnixStream, max: usize) -> io::Result<Vec<OwnedFd>> {
    let mut buffers = Buffers::new(max);
    let mut iov = empty_iovec();
    let mut msg = buffers.header(&mut iov);
    let mut out = Vec::new();
    // SAFETY: as in `send_fds`; the kernel writes at most the control
    // buffer's length of control data, and every descriptor it passed is
    // new to this process, so each is owned once.
    unsafe {
        let n = libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    out.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::other("descriptors were cut off"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::shm::Layout;

    /// A host's first rank serves its descriptors to a rank with the
    /// secret and to no one else; what arrives maps the same segment.
    #[test]
    fn descriptors_reach_ranks_with_the_secret_only() {
        let host = HostResources::create(Layout::new(2, 16, 4096).unwrap()).unwrap();
        let name = format!("tandem-test-share-{}", std::process::id());
        let listener = listen(&name).unwrap();
        let secret = [7u8; SECRET_BYTES];
        let deadline = Instant::now() + Duration::from_secs(10);
        let fetcher = {
            let name = name.clone();
            std::thread::spawn(move || {
                // A stranger first: refused (its stream closes unanswered).
                let mut s = UnixStream::connect_addr(&address(&name).unwrap()).unwrap();
                s.write_all(&[0u8; SECRET_BYTES]).unwrap();
                let mut b = [0u8; 1];
                assert_eq!(s.read(&mut b).unwrap_or(0), 0, "a stranger got an answer");
                fetch(&name, &secret, 4, deadline).unwrap()
            })
        };
        serve(&host, &listener, 1, &secret, deadline).unwrap();
        let (segment, wake) = fetcher.join().unwrap();
        assert_eq!(wake.len(), 4);
        let stat = |fd: RawFd| {
            // SAFETY: plain data; fstat fills it.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `st` is valid for writes.
            assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
            (st.st_dev, st.st_ino)
        };
        assert_eq!(stat(segment.as_raw_fd()), stat(host.descriptors().0));
    }
}
