//! RWAPI on a job of one rank (no launcher): blocks are private memory and
//! writes to itself go through the engine.

use crate::error::ErrorClass;
use crate::runtime::Runtime;

use super::Net;

#[test]
fn writes_are_checked_and_carried_out_on_a_job_of_one() {
    let mut rt = Runtime::init().expect("a job of one rank");
    assert!(rt.rwapi().is_none(), "not started yet");
    assert_eq!(rt.rwapi_finalize(), None);
    rt.rwapi_init().expect("started");
    rt.rwapi_init().expect("starting twice does nothing");
    let mut rw = rt.rwapi().expect("started");
    assert_eq!((rw.rank(), rw.size()), (0, 1));

    let (src, local) = rw.alloc(64).expect("memory");
    let (dst, remote) = rw.alloc(64).expect("memory");
    assert_eq!(local.node, 0);
    assert_ne!(local.key, remote.key);
    assert_eq!(src as usize % 64, 0);
    // SAFETY: inside the 64-byte blocks just allocated (zeroed).
    unsafe {
        assert!((0..64).all(|i| *dst.add(i) == 0));
        std::ptr::write_bytes(src, 7, 64);
    }

    // Refused at once, nothing written.
    let off = |net: Net, by: u64| Net {
        addr: net.addr + by,
        ..net
    };
    assert_eq!(rw.write(1, local, remote, 8), Err(ErrorClass::Rank));
    let elsewhere = Net { node: 1, ..remote };
    assert_eq!(rw.write(0, local, elsewhere, 8), Err(ErrorClass::Arg));
    let unknown = Net {
        key: 0x7fff_fff0,
        ..local
    };
    assert_eq!(rw.write(0, unknown, remote, 8), Err(ErrorClass::Win));
    assert_eq!(
        rw.write(0, off(local, 60), remote, 8),
        Err(ErrorClass::RmaRange)
    );
    assert_eq!(rw.issent(0), Err(ErrorClass::Request));
    assert_eq!(rw.issent(1 << 40), Err(ErrorClass::Request));

    let sid = rw
        .write(0, off(local, 8), off(remote, 16), 32)
        .expect("sid");
    assert!(sid > 0);
    rw.flush().expect("flushed");
    assert_eq!(rw.issent(sid), Ok(true));
    // SAFETY: inside the destination block, written and flushed.
    unsafe {
        assert!((0..16).all(|i| *dst.add(i) == 0));
        assert!((16..48).all(|i| *dst.add(i) == 7));
        assert!((48..64).all(|i| *dst.add(i) == 0));
    }

    // A write past the end of its target block is refused by the target.
    rw.write(0, local, off(remote, 40), 32).expect("sid");
    assert_eq!(rw.flush(), Err(ErrorClass::RmaRange));
    rw.flush().expect("a refusal is reported once");

    // Small messages, oldest first.
    assert_eq!(rw.receive(), None);
    rw.send(0, &[1; 16]).expect("sent");
    rw.send(0, &[2; 16]).expect("sent");
    assert_eq!(rw.send(1, &[3; 16]), Err(ErrorClass::Rank));
    let mut got = Vec::new();
    while got.len() < 2 {
        if let Some(m) = rw.receive() {
            got.push(m);
        }
    }
    assert_eq!(got, vec![(0, [1; 16]), (0, [2; 16])]);

    assert_eq!(rw.free(dst.wrapping_add(1)), Err(ErrorClass::Arg));
    rw.free(dst).expect("freed");
    assert_eq!(rw.free(dst), Err(ErrorClass::Arg), "freed twice");
    assert_eq!(rw.write(0, remote, local, 8), Err(ErrorClass::Win));

    assert_eq!(rt.rwapi_finalize(), Some(Ok(())));
    assert!(rt.rwapi().is_none());
    rt.finalize().expect("finalized");
}
