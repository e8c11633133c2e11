//! Reduction operations at the C boundary: the predefined `MPI_Op` handles,
//! user-defined ones (`MPI_Op_create`, commutative or not), and the
//! [`Reducer`] each becomes for a given datatype.
//!
//! User operation handles are `USER_OP_BASE + index`. A user function is
//! called on buffers laid out as its datatype describes: directly on the
//! packed data when the layout is contiguous, otherwise on copies unpacked
//! into that layout (and the result packed back).
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use tandem::coll::ops::{PredefOp, Predefined, Reducer, ReducerRef};
use tandem::datatype::{Layout, Prim};
use tandem::{Error, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype;
use crate::state::{call, call_local, Fail, State};

/// First handle of user-defined operations.
pub const USER_OP_BASE: usize = 0x0200_0000;

#[derive(Clone, Copy)]
enum UserFn {
    Int(MPI_User_function),
    Big(MPI_User_function_c),
    /// A Fortran `USER_FUNCTION(INVEC, INOUTVEC, LEN, DATATYPE)`: the
    /// datatype is an INTEGER handle.
    Fortran(crate::fortran::FortranUserFunction),
}

#[derive(Clone, Copy)]
struct UserOp {
    f: UserFn,
    commute: bool,
}

/// The user-defined operations of the process.
#[derive(Default)]
pub struct OpTable {
    ops: Vec<Option<UserOp>>,
    /// Predefined reducers made so far (operation, primitive, element
    /// size), so that a reduction called in a loop does not allocate one
    /// per call.
    predefined: Vec<(PredefOp, Prim, usize, ReducerRef)>,
}

/// Predefined reducers kept (a program uses a handful).
const PREDEFINED_KEPT: usize = 16;

/// The predefined operation behind a handle.
pub fn predefined(op: MPI_Op) -> Option<PredefOp> {
    Some(match op {
        MPI_SUM => PredefOp::Sum,
        MPI_PROD => PredefOp::Prod,
        MPI_MIN => PredefOp::Min,
        MPI_MAX => PredefOp::Max,
        MPI_LAND => PredefOp::Land,
        MPI_LOR => PredefOp::Lor,
        MPI_LXOR => PredefOp::Lxor,
        MPI_BAND => PredefOp::Band,
        MPI_BOR => PredefOp::Bor,
        MPI_BXOR => PredefOp::Bxor,
        MPI_MINLOC => PredefOp::MinLoc,
        MPI_MAXLOC => PredefOp::MaxLoc,
        MPI_REPLACE => PredefOp::Replace,
        MPI_NO_OP => PredefOp::NoOp,
        _ => return None,
    })
}

fn user(s: &State, op: MPI_Op) -> Option<UserOp> {
    s.ext
        .ops
        .ops
        .get(op.wrapping_sub(USER_OP_BASE))
        .copied()
        .flatten()
}

fn op_error(comm: MPI_Comm, msg: String) -> Fail {
    Fail::new(comm, ErrorClass::Op, msg)
}

/// Checks `op` for use with `dt` and returns the reducer of packed data.
pub fn reducer(
    s: &mut State,
    comm: MPI_Comm,
    op: MPI_Op,
    dt: MPI_Datatype,
    layout: &Arc<Layout>,
) -> Result<ReducerRef, Fail> {
    if let Some(p) = predefined(op) {
        let prim = layout.single_prim().ok_or_else(|| {
            op_error(
                comm,
                format!(
                    "{} needs a datatype made of a single predefined type",
                    p.name()
                ),
            )
        })?;
        let kept = &mut s.ext.ops.predefined;
        if let Some((.., r)) = kept
            .iter()
            .find(|&&(o, q, e, _)| o == p && q == prim && e == layout.size)
        {
            return Ok(r.clone());
        }
        let r: ReducerRef =
            Arc::new(Predefined::new(p, prim, layout.size).map_err(|error| Fail { comm, error })?);
        if kept.len() < PREDEFINED_KEPT {
            kept.push((p, prim, layout.size, r.clone()));
        }
        return Ok(r);
    }
    let u = user(s, op).ok_or_else(|| {
        op_error(
            comm,
            if op == MPI_OP_NULL {
                "MPI_OP_NULL is not an operation".into()
            } else {
                format!("invalid operation handle {op:#x}")
            },
        )
    })?;
    Ok(Arc::new(UserReducer {
        op: u,
        dt,
        layout: layout.clone(),
    }))
}

struct UserReducer {
    op: UserOp,
    dt: MPI_Datatype,
    layout: Arc<Layout>,
}

impl UserReducer {
    /// Calls the user function on `n` elements laid out as the datatype says.
    ///
    /// # Safety
    /// Both pointers address `n` elements of the datatype.
    unsafe fn invoke(&self, inp: *mut u8, inout: *mut u8, n: usize) {
        let mut dt = self.dt;
        let mut done = 0usize;
        while done < n {
            let chunk = (n - done).min(c_int::MAX as usize);
            let skip = done as isize * self.layout.extent;
            let (a, b) = (inp.wrapping_offset(skip), inout.wrapping_offset(skip));
            // SAFETY: the user function follows MPI_User_function's contract
            // and reads/writes `chunk` elements at each pointer, which the
            // caller guarantees are there.
            unsafe {
                match self.op.f {
                    UserFn::Int(f) => {
                        let mut len = chunk as c_int;
                        f(a.cast::<c_void>(), b.cast::<c_void>(), &mut len, &mut dt)
                    }
                    UserFn::Big(f) => {
                        let mut len = chunk as MPI_Count;
                        f(a.cast::<c_void>(), b.cast::<c_void>(), &mut len, &mut dt)
                    }
                    UserFn::Fortran(f) => {
                        let mut len = chunk as c_int;
                        let mut fdt = crate::handle_int::MPI_Type_toint(dt);
                        f(a.cast::<c_void>(), b.cast::<c_void>(), &mut len, &mut fdt)
                    }
                }
            }
            done += chunk;
        }
    }
}

impl Reducer for UserReducer {
    fn commutative(&self) -> bool {
        self.op.commute
    }

    fn elem_size(&self) -> usize {
        self.layout.size
    }

    fn reduce(&self, inp: &[u8], inout: &mut [u8]) -> tandem::Result<()> {
        let l = &*self.layout;
        if l.size == 0 {
            return Ok(());
        }
        let n = inp.len() / l.size;
        if let Some(off) = l.contiguous_at() {
            // The user function may write its `invec`: give it a copy.
            let mut a = inp.to_vec();
            // SAFETY: packed contiguous data is the datatype's layout shifted
            // by `off`; both buffers hold `n` elements.
            unsafe {
                self.invoke(
                    a.as_mut_ptr().wrapping_offset(-off),
                    inout.as_mut_ptr().wrapping_offset(-off),
                    n,
                )
            };
            return Ok(());
        }
        if l.extent < 0 {
            return Err(Error::new(
                ErrorClass::Op,
                "user operations on datatypes with a negative extent are not supported",
            ));
        }
        let lo = l.true_lb.min(0);
        let hi =
            (n.saturating_sub(1) as isize * l.extent + l.true_lb + l.true_extent).max(l.extent);
        let span = (hi - lo) as usize;
        let mut a = vec![0u8; span];
        let mut b = vec![0u8; span];
        let (pa, pb) = (
            a.as_mut_ptr().wrapping_offset(-lo),
            b.as_mut_ptr().wrapping_offset(-lo),
        );
        // SAFETY: `a` and `b` cover every byte of `n` elements placed at
        // `pa`/`pb` (from true_lb to the end of the last one).
        unsafe {
            l.unpack(inp, pa, n);
            l.unpack(inout, pb, n);
            self.invoke(pa, pb, n);
            let mut out = Vec::with_capacity(inout.len());
            l.pack(pb, n, &mut out);
            inout.copy_from_slice(&out);
        }
        Ok(())
    }
}

fn create(op: *mut MPI_Op, f: UserFn, commute: c_int) -> c_int {
    call("MPI_Op_create", |s| {
        args::out_ptr(MPI_COMM_WORLD, op, "op")?;
        let entry = Some(UserOp {
            f,
            commute: commute != 0,
        });
        let t = &mut s.ext.ops.ops;
        let i = match t.iter().position(Option::is_none) {
            Some(i) => {
                t[i] = entry;
                i
            }
            None => {
                t.push(entry);
                t.len() - 1
            }
        };
        // SAFETY: checked non-null.
        unsafe { put(op, USER_OP_BASE + i) };
        Ok(())
    })
}

/// `MPI_OP_CREATE` from Fortran.
pub fn create_fortran(
    op: *mut MPI_Op,
    f: crate::fortran::FortranUserFunction,
    commute: c_int,
) -> c_int {
    create(op, UserFn::Fortran(f), commute)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Op_create(
    user_fn: Option<MPI_User_function>,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    match user_fn {
        Some(f) => create(op, UserFn::Int(f), commute),
        None => call_local("MPI_Op_create", || {
            Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "NULL user function",
            ))
        }),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Op_create_c(
    user_fn: Option<MPI_User_function_c>,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    match user_fn {
        Some(f) => create(op, UserFn::Big(f), commute),
        None => call_local("MPI_Op_create_c", || {
            Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "NULL user function",
            ))
        }),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Op_free(op: *mut MPI_Op) -> c_int {
    call("MPI_Op_free", |s| {
        args::out_ptr(MPI_COMM_WORLD, op, "op")?;
        // SAFETY: checked non-null.
        let h = unsafe { *op };
        if predefined(h).is_some() {
            return Err(op_error(
                MPI_COMM_WORLD,
                "predefined operations cannot be freed".into(),
            ));
        }
        let slot = s
            .ext
            .ops
            .ops
            .get_mut(h.wrapping_sub(USER_OP_BASE))
            .filter(|o| o.is_some())
            .ok_or_else(|| op_error(MPI_COMM_WORLD, format!("invalid operation handle {h:#x}")))?;
        *slot = None;
        // SAFETY: checked non-null.
        unsafe { put(op, MPI_OP_NULL) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
    call("MPI_Op_commutative", |s| {
        args::out_ptr(MPI_COMM_WORLD, commute, "commute")?;
        let c = if predefined(op).is_some() {
            true
        } else {
            user(s, op)
                .ok_or_else(|| {
                    op_error(MPI_COMM_WORLD, format!("invalid operation handle {op:#x}"))
                })?
                .commute
        };
        // SAFETY: checked non-null.
        unsafe { put(commute, c_int::from(c)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    call("MPI_Reduce_local", |s| {
        let comm = MPI_COMM_WORLD;
        // MPI_IN_PLACE is the address 1: reading it would crash.
        if crate::coll::is_in_place(inbuf) || crate::coll::is_in_place(inoutbuf) {
            return Err(crate::coll::in_place_misuse(comm, "MPI_Reduce_local"));
        }
        if count > 0 && std::ptr::eq(inbuf, inoutbuf) {
            return Err(Fail::new(
                comm,
                ErrorClass::Buffer,
                "MPI_Reduce_local: inbuf and inoutbuf are the same buffer",
            ));
        }
        let tin = datatype::typed(comm, inbuf, count, datatype)?;
        let tio = datatype::typed(comm, inoutbuf, count, datatype)?;
        let r = reducer(s, comm, op, datatype, &tio.layout)?;
        let len = tio.bytes();
        if let (Some(a), Some(b)) = (tin.direct(), tio.direct()) {
            let (a0, b0) = (a as usize, b as usize);
            if len == 0 || a0 + len <= b0 || b0 + len <= a0 {
                // Contiguous and apart: reduced where they lie (packing
                // meant two fresh copies per call, whose page faults cost
                // 40 times the arithmetic at 1 MiB).
                // SAFETY: both hold `len` bytes (`count` elements of a
                // datatype without gaps, MPI contract) and do not overlap.
                let (a, b) = unsafe {
                    (
                        std::slice::from_raw_parts(a.cast_const(), len),
                        std::slice::from_raw_parts_mut(b, len),
                    )
                };
                return r.reduce(a, b).map_err(|error| Fail { comm, error });
            }
        }
        // SAFETY: both buffers hold `count` elements (MPI contract).
        let (a, mut b) = unsafe { (tin.pack(), tio.pack()) };
        r.reduce(&a, &mut b).map_err(|error| Fail { comm, error })?;
        // SAFETY: as above.
        unsafe { tio.unpack(&b) };
        Ok(())
    })
}
