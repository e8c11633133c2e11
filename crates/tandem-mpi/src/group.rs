//! Groups: `MPI_Comm_group` and the group operations. A group is an ordered
//! list of world ranks; handles are `GROUP_BASE + index`, `MPI_GROUP_EMPTY`
//! is the empty group.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::c_int;
use std::sync::Arc;

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::state::{call, Fail, State};

/// First handle of groups.
pub const GROUP_BASE: usize = 0x0300_0000;

/// The live groups of the process.
#[derive(Default)]
pub struct GroupTable {
    groups: Vec<Option<Group>>,
}

struct Group {
    members: Arc<[u32]>,
    /// The session a process-set group came from
    /// (`MPI_Group_from_session_pset`); communicators made from it belong
    /// to that session (for its buffered-send buffer).
    session: Option<MPI_Session>,
}

fn entry(s: &State, g: MPI_Group) -> Option<&Group> {
    s.ext
        .groups
        .groups
        .get(g.wrapping_sub(GROUP_BASE))?
        .as_ref()
}

/// Records that group `g` came from `session`.
pub fn set_session(s: &mut State, g: MPI_Group, session: MPI_Session) {
    if let Some(Some(e)) = s.ext.groups.groups.get_mut(g.wrapping_sub(GROUP_BASE)) {
        e.session = Some(session);
    }
}

/// The session group `g` came from, if it is a process-set group.
pub fn session_of(s: &State, g: MPI_Group) -> Option<MPI_Session> {
    entry(s, g)?.session
}

fn group_error(g: MPI_Group) -> Fail {
    Fail::new(
        MPI_COMM_WORLD,
        ErrorClass::Group,
        if g == MPI_GROUP_NULL {
            "MPI_GROUP_NULL is not a group".to_string()
        } else {
            format!("invalid group handle {g:#x}")
        },
    )
}

/// The members (world ranks) of a group handle.
pub fn members(s: &State, g: MPI_Group) -> Result<Arc<[u32]>, Fail> {
    if g == MPI_GROUP_EMPTY {
        return Ok(Arc::from(Vec::new()));
    }
    entry(s, g)
        .map(|e| e.members.clone())
        .ok_or_else(|| group_error(g))
}

/// A new group handle.
pub fn add(s: &mut State, g: Arc<[u32]>) -> MPI_Group {
    if g.is_empty() {
        return MPI_GROUP_EMPTY;
    }
    let t = &mut s.ext.groups.groups;
    let g = Some(Group {
        members: g,
        session: None,
    });
    let i = match t.iter().position(Option::is_none) {
        Some(i) => {
            t[i] = g;
            i
        }
        None => {
            t.push(g);
            t.len() - 1
        }
    };
    GROUP_BASE + i
}

/// This process's rank in a group, if it is a member.
fn my_rank(s: &State, g: &[u32]) -> Option<usize> {
    let me = s.rt.rank();
    g.iter().position(|&w| w == me)
}

/// `MPI_IDENT`, `MPI_SIMILAR` or `MPI_UNEQUAL` for two member lists.
pub fn compare(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return MPI_IDENT;
    }
    let mut x = a.to_vec();
    let mut y = b.to_vec();
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        MPI_SIMILAR
    } else {
        MPI_UNEQUAL
    }
}

fn out_group(s: &mut State, newgroup: *mut MPI_Group, g: Vec<u32>) -> Result<(), Fail> {
    let h = add(s, Arc::from(g));
    // SAFETY: the caller checked `newgroup` non-null.
    unsafe { put(newgroup, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    call("MPI_Comm_group", |s| {
        args::out_ptr(comm, group, "group")?;
        let id = args::comm(s, comm)?;
        let g =
            s.rt.comm(id)
                .map_err(|error| Fail { comm, error })?
                .group
                .clone();
        let h = add(s, g);
        // SAFETY: checked non-null.
        unsafe { put(group, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    call("MPI_Group_size", |s| {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        let n = members(s, group)?.len();
        // SAFETY: checked non-null.
        unsafe { put(size, n as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    call("MPI_Group_rank", |s| {
        args::out_ptr(MPI_COMM_WORLD, rank, "rank")?;
        let g = members(s, group)?;
        let r = my_rank(s, &g).map_or(MPI_UNDEFINED, |r| r as c_int);
        // SAFETY: checked non-null.
        unsafe { put(rank, r) };
        Ok(())
    })
}

/// Reads `n` ranks of a C array and checks them against a group of `size`.
///
/// # Safety
/// `p` must be valid for `n` reads when `n > 0`.
unsafe fn ranks_in(p: *const c_int, n: c_int, size: usize, what: &str) -> Result<Vec<usize>, Fail> {
    if n < 0 {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!("negative {what} count {n}"),
        ));
    }
    if n > 0 && p.is_null() {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!("NULL {what} array"),
        ));
    }
    (0..n as usize)
        .map(|i| {
            // SAFETY: the caller's promise.
            let r = unsafe { *p.add(i) };
            usize::try_from(r)
                .ok()
                .filter(|&r| r < size)
                .ok_or_else(|| {
                    Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Rank,
                        format!("rank {r} is not in a group of {size}"),
                    )
                })
        })
        .collect()
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_translate_ranks(
    group1: MPI_Group,
    n: c_int,
    ranks1: *const c_int,
    group2: MPI_Group,
    ranks2: *mut c_int,
) -> c_int {
    call("MPI_Group_translate_ranks", |s| {
        let (a, b) = (members(s, group1)?, members(s, group2)?);
        if n > 0 {
            args::out_ptr(MPI_COMM_WORLD, ranks2, "ranks2")?;
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: `n` entries by the MPI contract (`ranks1` checked below).
            let r = unsafe {
                if ranks1.is_null() {
                    return Err(Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Arg,
                        "NULL ranks1 array",
                    ));
                }
                *ranks1.add(i)
            };
            let out = if r == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let w = usize::try_from(r)
                    .ok()
                    .and_then(|r| a.get(r))
                    .ok_or_else(|| {
                        Fail::new(
                            MPI_COMM_WORLD,
                            ErrorClass::Rank,
                            format!("rank {r} is not in group1"),
                        )
                    })?;
                b.iter()
                    .position(|x| x == w)
                    .map_or(MPI_UNDEFINED, |p| p as c_int)
            };
            // SAFETY: `n` entries by the MPI contract.
            unsafe { *ranks2.add(i) = out };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_compare(
    group1: MPI_Group,
    group2: MPI_Group,
    result: *mut c_int,
) -> c_int {
    call("MPI_Group_compare", |s| {
        args::out_ptr(MPI_COMM_WORLD, result, "result")?;
        let r = compare(&members(s, group1)?, &members(s, group2)?);
        // SAFETY: checked non-null.
        unsafe { put(result, r) };
        Ok(())
    })
}

fn set_op(
    func: &'static str,
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
    f: fn(&[u32], &[u32]) -> Vec<u32>,
) -> c_int {
    call(func, |s| {
        args::out_ptr(MPI_COMM_WORLD, newgroup, "newgroup")?;
        let g = f(&members(s, group1)?, &members(s, group2)?);
        out_group(s, newgroup, g)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_union(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    set_op("MPI_Group_union", group1, group2, newgroup, |a, b| {
        let mut v = a.to_vec();
        v.extend(b.iter().filter(|x| !a.contains(x)));
        v
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_intersection(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    set_op(
        "MPI_Group_intersection",
        group1,
        group2,
        newgroup,
        |a, b| a.iter().copied().filter(|x| b.contains(x)).collect(),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_difference(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    set_op("MPI_Group_difference", group1, group2, newgroup, |a, b| {
        a.iter().copied().filter(|x| !b.contains(x)).collect()
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_incl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    call("MPI_Group_incl", |s| {
        args::out_ptr(MPI_COMM_WORLD, newgroup, "newgroup")?;
        let g = members(s, group)?;
        // SAFETY: `n` entries by the MPI contract.
        let rs = unsafe { ranks_in(ranks, n, g.len(), "ranks")? };
        let mut seen = vec![false; g.len()];
        for &r in &rs {
            if std::mem::replace(&mut seen[r], true) {
                return Err(Fail::new(
                    MPI_COMM_WORLD,
                    ErrorClass::Rank,
                    format!("rank {r} listed twice"),
                ));
            }
        }
        out_group(s, newgroup, rs.iter().map(|&r| g[r]).collect())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    call("MPI_Group_excl", |s| {
        args::out_ptr(MPI_COMM_WORLD, newgroup, "newgroup")?;
        let g = members(s, group)?;
        // SAFETY: `n` entries by the MPI contract.
        let rs = unsafe { ranks_in(ranks, n, g.len(), "ranks")? };
        let v = (0..g.len())
            .filter(|r| !rs.contains(r))
            .map(|r| g[r])
            .collect();
        out_group(s, newgroup, v)
    })
}

/// Expands `n` (first, last, stride) triplets into ranks.
///
/// # Safety
/// `ranges` must be valid for `n` triplets.
unsafe fn ranges(ranges: *const [c_int; 3], n: c_int, size: usize) -> Result<Vec<usize>, Fail> {
    let bad = |m: String| Fail::new(MPI_COMM_WORLD, ErrorClass::Arg, m);
    if n < 0 || (n > 0 && ranges.is_null()) {
        return Err(bad("invalid ranges array".into()));
    }
    let mut out = Vec::new();
    for i in 0..n as usize {
        // SAFETY: the caller's promise.
        let [first, last, stride] = unsafe { *ranges.add(i) };
        if stride == 0 {
            return Err(bad("range with stride 0".into()));
        }
        let mut r = first as i64;
        while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
            let u = usize::try_from(r)
                .ok()
                .filter(|&u| u < size)
                .ok_or_else(|| {
                    Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Rank,
                        format!("rank {r} is not in a group of {size}"),
                    )
                })?;
            out.push(u);
            r += stride as i64;
        }
    }
    Ok(out)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges_: *const [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    call("MPI_Group_range_incl", |s| {
        args::out_ptr(MPI_COMM_WORLD, newgroup, "newgroup")?;
        let g = members(s, group)?;
        // SAFETY: `n` triplets by the MPI contract.
        let rs = unsafe { ranges(ranges_, n, g.len())? };
        out_group(s, newgroup, rs.iter().map(|&r| g[r]).collect())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges_: *const [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    call("MPI_Group_range_excl", |s| {
        args::out_ptr(MPI_COMM_WORLD, newgroup, "newgroup")?;
        let g = members(s, group)?;
        // SAFETY: `n` triplets by the MPI contract.
        let rs = unsafe { ranges(ranges_, n, g.len())? };
        let v = (0..g.len())
            .filter(|r| !rs.contains(r))
            .map(|r| g[r])
            .collect();
        out_group(s, newgroup, v)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_free(group: *mut MPI_Group) -> c_int {
    call("MPI_Group_free", |s| {
        args::out_ptr(MPI_COMM_WORLD, group, "group")?;
        // SAFETY: checked non-null.
        let g = unsafe { *group };
        if g != MPI_GROUP_EMPTY {
            members(s, g)?;
            s.ext.groups.groups[g - GROUP_BASE] = None;
        }
        // SAFETY: checked non-null.
        unsafe { put(group, MPI_GROUP_NULL) };
        Ok(())
    })
}
