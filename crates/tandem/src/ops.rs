//! Reduction operations: the predefined ones on every primitive they apply
//! to, and the [`Reducer`] interface through which collectives apply any
//! operation (user-defined ones included) to packed data.
//!
//! Every reduction computes `inout = in ∘ inout` element by element, `in`
//! being the operand from the lower ranks: that is the order the MPI
//! standard gives user functions, and what lets the algorithms keep rank
//! order for non-commutative operations.

use std::sync::Arc;

use crate::datatype::{PairKind, Prim};
use crate::error::{Error, ErrorClass, Result};

/// The predefined operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PredefOp {
    Sum,
    Prod,
    Min,
    Max,
    Land,
    Lor,
    Lxor,
    Band,
    Bor,
    Bxor,
    MinLoc,
    MaxLoc,
    /// Only for one-sided accumulate; not valid in reductions.
    Replace,
    /// Only for one-sided accumulate; not valid in reductions.
    NoOp,
}

impl PredefOp {
    pub fn name(self) -> &'static str {
        match self {
            PredefOp::Sum => "MPI_SUM",
            PredefOp::Prod => "MPI_PROD",
            PredefOp::Min => "MPI_MIN",
            PredefOp::Max => "MPI_MAX",
            PredefOp::Land => "MPI_LAND",
            PredefOp::Lor => "MPI_LOR",
            PredefOp::Lxor => "MPI_LXOR",
            PredefOp::Band => "MPI_BAND",
            PredefOp::Bor => "MPI_BOR",
            PredefOp::Bxor => "MPI_BXOR",
            PredefOp::MinLoc => "MPI_MINLOC",
            PredefOp::MaxLoc => "MPI_MAXLOC",
            PredefOp::Replace => "MPI_REPLACE",
            PredefOp::NoOp => "MPI_NO_OP",
        }
    }
}

fn is_int(p: Prim) -> bool {
    matches!(
        p,
        Prim::I8 | Prim::I16 | Prim::I32 | Prim::I64 | Prim::U8 | Prim::U16 | Prim::U32 | Prim::U64
    )
}

fn is_float(p: Prim) -> bool {
    matches!(p, Prim::F32 | Prim::F64 | Prim::LongDouble)
}

fn is_complex(p: Prim) -> bool {
    matches!(p, Prim::C32 | Prim::C64 | Prim::CLongDouble)
}

fn is_logical(p: Prim) -> bool {
    matches!(p, Prim::Bool | Prim::Logical4)
}

/// Whether `op` applies to values of `p` (MPI-4.1 §6.9.2's table).
pub fn applies(op: PredefOp, p: Prim) -> bool {
    use PredefOp::*;
    let long_double_ok = cfg!(target_arch = "x86_64")
        || !matches!(
            p,
            Prim::LongDouble | Prim::CLongDouble | Prim::Pair(PairKind::LongDouble)
        );
    long_double_ok
        && match op {
            Sum | Prod => is_int(p) || is_float(p) || is_complex(p),
            Min | Max => is_int(p) || is_float(p),
            Land | Lor | Lxor => is_int(p) || is_logical(p),
            Band | Bor | Bxor => is_int(p) || p == Prim::Byte,
            MinLoc | MaxLoc => matches!(p, Prim::Pair(_)),
            Replace | NoOp => false,
        }
}

/// Why `op` cannot reduce `p`, for `MPI_ERR_OP`.
pub fn check(op: PredefOp, p: Prim) -> Result<()> {
    if applies(op, p) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Op,
            format!("{} is not defined on {p:?} values", op.name()),
        ))
    }
}

/// Applies an operation to packed data.
pub trait Reducer {
    /// Whether operands may be combined in any order.
    fn commutative(&self) -> bool;
    /// Bytes of one packed element (a whole datatype element).
    fn elem_size(&self) -> usize;
    /// `inout[i] = inp[i] ∘ inout[i]` for every element; both slices hold
    /// the same whole number of elements.
    fn reduce(&self, inp: &[u8], inout: &mut [u8]) -> Result<()>;
}

/// A shared reduction, as schedules hold it.
pub type ReducerRef = Arc<dyn Reducer>;

/// A predefined operation on elements made of one primitive kind.
pub struct Predefined {
    pub op: PredefOp,
    pub prim: Prim,
    /// Packed bytes of one element (a multiple of the primitive's size).
    pub elem: usize,
}

impl Predefined {
    /// Checks that the operation applies and builds the reducer.
    pub fn new(op: PredefOp, prim: Prim, elem: usize) -> Result<Predefined> {
        check(op, prim)?;
        Ok(Predefined { op, prim, elem })
    }
}

impl Reducer for Predefined {
    fn commutative(&self) -> bool {
        true
    }

    fn elem_size(&self) -> usize {
        self.elem
    }

    fn reduce(&self, inp: &[u8], inout: &mut [u8]) -> Result<()> {
        apply(self.op, self.prim, inp, inout)
    }
}

macro_rules! each {
    ($t:ty, $inp:expr, $inout:expr, |$a:ident, $b:ident| $e:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        for (x, y) in $inp.chunks_exact(S).zip($inout.chunks_exact_mut(S)) {
            let $a = <$t>::from_ne_bytes(x.try_into().expect("chunk of S bytes"));
            let $b = <$t>::from_ne_bytes((&*y).try_into().expect("chunk of S bytes"));
            y.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

macro_rules! int_ops {
    ($t:ty, $op:expr, $inp:expr, $inout:expr) => {{
        use PredefOp::*;
        match $op {
            Sum => each!($t, $inp, $inout, |a, b| a.wrapping_add(b)),
            Prod => each!($t, $inp, $inout, |a, b| a.wrapping_mul(b)),
            Min => each!($t, $inp, $inout, |a, b| a.min(b)),
            Max => each!($t, $inp, $inout, |a, b| a.max(b)),
            Land => each!($t, $inp, $inout, |a, b| <$t>::from(a != 0 && b != 0)),
            Lor => each!($t, $inp, $inout, |a, b| <$t>::from(a != 0 || b != 0)),
            Lxor => each!($t, $inp, $inout, |a, b| <$t>::from((a != 0) != (b != 0))),
            Band => each!($t, $inp, $inout, |a, b| a & b),
            Bor => each!($t, $inp, $inout, |a, b| a | b),
            Bxor => each!($t, $inp, $inout, |a, b| a ^ b),
            _ => unreachable!("checked by applies()"),
        }
    }};
}

macro_rules! float_ops {
    ($t:ty, $op:expr, $inp:expr, $inout:expr) => {{
        use PredefOp::*;
        match $op {
            Sum => each!($t, $inp, $inout, |a, b| a + b),
            Prod => each!($t, $inp, $inout, |a, b| a * b),
            // NaN-ignoring like C's fmin/fmax, the usual MPI behaviour.
            Min => each!($t, $inp, $inout, |a, b| if a < b { a } else { b }),
            Max => each!($t, $inp, $inout, |a, b| if a > b { a } else { b }),
            _ => unreachable!("checked by applies()"),
        }
    }};
}

macro_rules! complex_ops {
    ($t:ty, $op:expr, $inp:expr, $inout:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        for (x, y) in $inp.chunks_exact(2 * S).zip($inout.chunks_exact_mut(2 * S)) {
            let g = |s: &[u8], i: usize| {
                <$t>::from_ne_bytes(s[i * S..(i + 1) * S].try_into().expect("S bytes"))
            };
            let (ar, ai, br, bi) = (g(x, 0), g(x, 1), g(y, 0), g(y, 1));
            let (r, i) = match $op {
                PredefOp::Sum => (ar + br, ai + bi),
                PredefOp::Prod => (ar * br - ai * bi, ar * bi + ai * br),
                _ => unreachable!("checked by applies()"),
            };
            y[..S].copy_from_slice(&r.to_ne_bytes());
            y[S..].copy_from_slice(&i.to_ne_bytes());
        }
    }};
}

/// `MINLOC`/`MAXLOC` on packed pairs (value, then a C int index).
fn pair_ops(op: PredefOp, k: PairKind, inp: &[u8], inout: &mut [u8]) {
    let vs = k.value_size();
    let w = vs + k.index_size();
    // The index is an int, or in Fortran's real pairs a real of the
    // value's kind; the smaller index wins a tie.
    let index_less = |a: &[u8], b: &[u8]| match k {
        PairKind::RealReal => {
            f32::from_ne_bytes(a.try_into().expect("4 bytes"))
                < f32::from_ne_bytes(b.try_into().expect("4 bytes"))
        }
        PairKind::DoubleDouble => {
            f64::from_ne_bytes(a.try_into().expect("8 bytes"))
                < f64::from_ne_bytes(b.try_into().expect("8 bytes"))
        }
        _ => {
            i32::from_ne_bytes(a.try_into().expect("4 bytes"))
                < i32::from_ne_bytes(b.try_into().expect("4 bytes"))
        }
    };
    for (x, y) in inp.chunks_exact(w).zip(inout.chunks_exact_mut(w)) {
        let ord = compare_values(k, &x[..vs], &y[..vs]);
        use std::cmp::Ordering::*;
        let take_a = match (op, ord) {
            (_, Some(Equal)) => index_less(&x[vs..], &y[vs..]),
            (PredefOp::MinLoc, Some(Less)) | (PredefOp::MaxLoc, Some(Greater)) => true,
            _ => false,
        };
        if take_a {
            y.copy_from_slice(x);
        }
    }
}

fn compare_values(k: PairKind, a: &[u8], b: &[u8]) -> Option<std::cmp::Ordering> {
    macro_rules! cmp {
        ($t:ty) => {
            <$t>::from_ne_bytes(a.try_into().ok()?)
                .partial_cmp(&<$t>::from_ne_bytes(b.try_into().ok()?))
        };
    }
    match k {
        PairKind::F32 | PairKind::RealReal => cmp!(f32),
        PairKind::F64 | PairKind::DoubleDouble => cmp!(f64),
        PairKind::I64 => cmp!(i64),
        PairKind::I32 => cmp!(i32),
        PairKind::I16 => cmp!(i16),
        PairKind::LongDouble => long_double::compare(a, b),
    }
}

/// Applies a predefined operation to packed values of `prim`:
/// `inout = inp ∘ inout`.
pub fn apply(op: PredefOp, prim: Prim, inp: &[u8], inout: &mut [u8]) -> Result<()> {
    check(op, prim)?;
    if inp.len() != inout.len() || !inp.len().is_multiple_of(prim.size().max(1)) {
        return Err(Error::new(
            ErrorClass::Intern,
            format!(
                "reduction over {} and {} bytes of {prim:?}",
                inp.len(),
                inout.len()
            ),
        ));
    }
    match prim {
        Prim::I8 => int_ops!(i8, op, inp, inout),
        Prim::I16 => int_ops!(i16, op, inp, inout),
        Prim::I32 => int_ops!(i32, op, inp, inout),
        Prim::I64 => int_ops!(i64, op, inp, inout),
        Prim::U8 | Prim::Byte => int_ops!(u8, op, inp, inout),
        Prim::U16 => int_ops!(u16, op, inp, inout),
        Prim::U32 => int_ops!(u32, op, inp, inout),
        Prim::U64 => int_ops!(u64, op, inp, inout),
        Prim::Bool => int_ops!(u8, op, inp, inout),
        Prim::Logical4 => int_ops!(i32, op, inp, inout),
        Prim::F32 => float_ops!(f32, op, inp, inout),
        Prim::F64 => float_ops!(f64, op, inp, inout),
        Prim::C32 => complex_ops!(f32, op, inp, inout),
        Prim::C64 => complex_ops!(f64, op, inp, inout),
        Prim::LongDouble => long_double::apply(op, inp, inout)?,
        Prim::CLongDouble => long_double::apply_complex(op, inp, inout)?,
        Prim::Pair(k) => pair_ops(op, k, inp, inout),
        Prim::Opaque(_) => unreachable!("checked by applies()"),
    }
    Ok(())
}

/// C `long double` arithmetic: the x87 unit on x86_64 (80-bit values in 16
/// bytes); other targets report the operation as unsupported.
mod long_double {
    use super::PredefOp;
    use crate::error::{Error, ErrorClass, Result};
    use std::cmp::Ordering;

    #[cfg(target_arch = "x86_64")]
    #[derive(Clone, Copy)]
    enum Arith {
        Add,
        Sub,
        Mul,
    }

    /// `a (op) b` on two x87 extended values.
    #[cfg(target_arch = "x86_64")]
    fn arith(op: Arith, a: &[u8], b: &[u8]) -> [u8; 16] {
        let mut x = [0u8; 16];
        let mut y = [0u8; 16];
        x[..10].copy_from_slice(&a[..10]);
        y[..10].copy_from_slice(&b[..10]);
        let mut out = [0u8; 16];
        // SAFETY: the three pointers address 16-byte local arrays; the x87
        // stack is left as found (two loads, one op-and-pop, one store-and-pop)
        // and every x87 register is declared clobbered.
        unsafe {
            match op {
                Arith::Add => std::arch::asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "faddp st(1), st",
                    "fstp tbyte ptr [{o}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), o = in(reg) out.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                    out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                ),
                Arith::Sub => std::arch::asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "fsubp st(1), st",
                    "fstp tbyte ptr [{o}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), o = in(reg) out.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                    out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                ),
                Arith::Mul => std::arch::asm!(
                    "fld tbyte ptr [{x}]", "fld tbyte ptr [{y}]", "fmulp st(1), st",
                    "fstp tbyte ptr [{o}]",
                    x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(), o = in(reg) out.as_mut_ptr(),
                    out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                    out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                ),
            }
        }
        out
    }

    #[cfg(target_arch = "x86_64")]
    pub fn compare(a: &[u8], b: &[u8]) -> Option<Ordering> {
        let mut x = [0u8; 16];
        let mut y = [0u8; 16];
        x[..10].copy_from_slice(&a[..10]);
        y[..10].copy_from_slice(&b[..10]);
        let (lt, gt, un): (u8, u8, u8);
        // SAFETY: loads from two 16-byte local arrays; fcomip pops one value
        // and fstp pops the other, so the x87 stack is left as found.
        unsafe {
            std::arch::asm!(
                "fld tbyte ptr [{y}]", "fld tbyte ptr [{x}]", "fcomip st, st(1)", "fstp st(0)",
                "setb {lt}", "seta {gt}", "setp {un}",
                x = in(reg) x.as_ptr(), y = in(reg) y.as_ptr(),
                lt = out(reg_byte) lt, gt = out(reg_byte) gt, un = out(reg_byte) un,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            );
        }
        if un != 0 {
            None
        } else if lt != 0 {
            Some(Ordering::Less)
        } else if gt != 0 {
            Some(Ordering::Greater)
        } else {
            Some(Ordering::Equal)
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn compare(_a: &[u8], _b: &[u8]) -> Option<Ordering> {
        None
    }

    #[cfg(target_arch = "x86_64")]
    pub fn apply(op: PredefOp, inp: &[u8], inout: &mut [u8]) -> Result<()> {
        for (x, y) in inp.chunks_exact(16).zip(inout.chunks_exact_mut(16)) {
            let r = match op {
                PredefOp::Sum => arith(Arith::Add, x, y),
                PredefOp::Prod => arith(Arith::Mul, x, y),
                PredefOp::Min | PredefOp::Max => {
                    let want = if op == PredefOp::Min {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                    if compare(x, y) == Some(want) {
                        x.try_into().expect("16 bytes")
                    } else {
                        continue;
                    }
                }
                _ => return Err(unsupported(op)),
            };
            y[..10].copy_from_slice(&r[..10]);
        }
        Ok(())
    }

    #[cfg(target_arch = "x86_64")]
    pub fn apply_complex(op: PredefOp, inp: &[u8], inout: &mut [u8]) -> Result<()> {
        for (x, y) in inp.chunks_exact(32).zip(inout.chunks_exact_mut(32)) {
            let (ar, ai, br, bi) = (&x[..16], &x[16..], &y[..16], &y[16..]);
            let (r, i) = match op {
                PredefOp::Sum => (arith(Arith::Add, ar, br), arith(Arith::Add, ai, bi)),
                PredefOp::Prod => (
                    arith(
                        Arith::Sub,
                        &arith(Arith::Mul, ar, br),
                        &arith(Arith::Mul, ai, bi),
                    ),
                    arith(
                        Arith::Add,
                        &arith(Arith::Mul, ar, bi),
                        &arith(Arith::Mul, ai, br),
                    ),
                ),
                _ => return Err(unsupported(op)),
            };
            y[..10].copy_from_slice(&r[..10]);
            y[16..26].copy_from_slice(&i[..10]);
        }
        Ok(())
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn apply(op: PredefOp, _inp: &[u8], _inout: &mut [u8]) -> Result<()> {
        Err(unsupported(op))
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn apply_complex(op: PredefOp, _inp: &[u8], _inout: &mut [u8]) -> Result<()> {
        Err(unsupported(op))
    }

    fn unsupported(op: PredefOp) -> Error {
        Error::new(
            ErrorClass::Op,
            format!("{} is not supported on long double values here", op.name()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn integer_ops() {
        let a = bytes_i32(&[1, -2, 0, 7]);
        let cases: &[(PredefOp, [i32; 4])] = &[
            (PredefOp::Sum, [4, 3, 0, 14]),
            (PredefOp::Prod, [3, -10, 0, 49]),
            (PredefOp::Min, [1, -2, 0, 7]),
            (PredefOp::Max, [3, 5, 0, 7]),
            (PredefOp::Land, [1, 1, 0, 1]),
            (PredefOp::Lor, [1, 1, 0, 1]),
            (PredefOp::Lxor, [0, 0, 0, 0]),
            (PredefOp::Band, [1, 4, 0, 7]),
            (PredefOp::Bor, [3, -1, 0, 7]),
            (PredefOp::Bxor, [2, -5, 0, 0]),
        ];
        for (op, want) in cases {
            let mut b = bytes_i32(&[3, 5, 0, 7]);
            apply(*op, Prim::I32, &a, &mut b).unwrap();
            assert_eq!(i32s(&b), want, "{op:?}");
        }
    }

    #[test]
    fn invalid_combinations_are_op_errors() {
        assert_eq!(
            check(PredefOp::Band, Prim::F64).unwrap_err().class,
            ErrorClass::Op
        );
        assert!(check(PredefOp::MinLoc, Prim::I32).is_err());
        assert!(check(PredefOp::Sum, Prim::Pair(PairKind::F64)).is_err());
        assert!(check(PredefOp::Replace, Prim::I32).is_err());
        assert!(check(PredefOp::Land, Prim::Bool).is_ok());
        assert!(check(PredefOp::Max, Prim::C64).is_err());
    }

    #[test]
    fn minloc_maxloc_ties_take_the_lower_index() {
        let pack = |v: f64, i: i32| {
            let mut b = v.to_ne_bytes().to_vec();
            b.extend(i.to_ne_bytes());
            b
        };
        let p = Prim::Pair(PairKind::F64);
        let mut y = pack(2.0, 5);
        apply(PredefOp::MinLoc, p, &pack(2.0, 3), &mut y).unwrap();
        assert_eq!(y, pack(2.0, 3));
        apply(PredefOp::MinLoc, p, &pack(4.0, 1), &mut y).unwrap();
        assert_eq!(y, pack(2.0, 3));
        apply(PredefOp::MaxLoc, p, &pack(4.0, 9), &mut y).unwrap();
        assert_eq!(y, pack(4.0, 9));
    }

    #[test]
    fn complex_product() {
        let c = |r: f64, i: f64| [r.to_ne_bytes(), i.to_ne_bytes()].concat();
        let mut y = c(3.0, 4.0);
        apply(PredefOp::Prod, Prim::C64, &c(1.0, 2.0), &mut y).unwrap();
        assert_eq!(y, c(-5.0, 10.0));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn long_double_sum_and_max() {
        // 1.5 and 2.25 as x87 extended values.
        fn ld(v: f64) -> [u8; 16] {
            let mut out = [0u8; 16];
            let bits = v.to_bits();
            let sign = (bits >> 63) as u16;
            let exp = ((bits >> 52) & 0x7ff) as i32 - 1023 + 16383;
            let mant = (bits & ((1 << 52) - 1)) << 11 | (1 << 63);
            out[..8].copy_from_slice(&mant.to_le_bytes());
            out[8..10].copy_from_slice(&((sign << 15) | exp as u16).to_le_bytes());
            out
        }
        let mut y = ld(2.25);
        long_double::apply(PredefOp::Sum, &ld(1.5), &mut y).unwrap();
        assert_eq!(y[..10], ld(3.75)[..10]);
        long_double::apply(PredefOp::Max, &ld(10.0), &mut y).unwrap();
        assert_eq!(y[..10], ld(10.0)[..10]);
        long_double::apply(PredefOp::Min, &ld(20.0), &mut y).unwrap();
        assert_eq!(y[..10], ld(10.0)[..10]);
    }
}
