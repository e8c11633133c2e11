//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`
//! (and their `_c` forms) for the one data representation the standard
//! defines, "external32": big-endian two's complement integers, IEEE
//! floating point (binary32, binary64, and binary128 for `long double`),
//! fixed sizes per primitive (MPI-5.0 table 12.2). Any other `datarep` is
//! `MPI_ERR_ARG`.
//!
//! The data is packed natively by the datatype engine first, then each
//! primitive of the signature is converted in order. The signature says
//! what a primitive is, but not which C name it had: `MPI_LONG` and
//! `MPI_LONG_LONG` are both 64-bit integers to the engine, `MPI_WCHAR` a
//! 32-bit one. A predefined datatype given directly gets its own size of
//! the standard's table (4 bytes for `MPI_LONG`, 2 for `MPI_WCHAR`); inside
//! a derived datatype such elements travel with their native width.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int, c_void};

use tandem::datatype::{PairKind, Prim};
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype::{layout, typed, Typed};
use crate::state::{call_local, Fail};

// The conversions below read native values as little-endian bytes.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "external32 conversion assumes a little-endian host"
);

/// How one primitive value is converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conv {
    /// Bytes as they are.
    Copy(usize),
    /// A number of this many bytes: byte order reversed.
    Swap(usize),
    /// An x86 80-bit `long double` in 16 bytes <-> IEEE binary128.
    LongDouble,
    /// A native integer of `native` bytes stored in `ext` bytes (fewer).
    Narrow {
        native: usize,
        ext: usize,
        signed: bool,
    },
}

impl Conv {
    fn native(self) -> usize {
        match self {
            Conv::Copy(n) | Conv::Swap(n) => n,
            Conv::LongDouble => 16,
            Conv::Narrow { native, .. } => native,
        }
    }

    fn ext(self) -> usize {
        match self {
            Conv::Copy(n) | Conv::Swap(n) => n,
            Conv::LongDouble => 16,
            Conv::Narrow { ext, .. } => ext,
        }
    }
}

fn long_double_conv() -> Conv {
    // The engine's long double is x87's 80-bit format on x86; elsewhere
    // (aarch64 Linux) it is binary128 already.
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        Conv::LongDouble
    } else {
        Conv::Swap(16)
    }
}

/// The conversions of one primitive of the signature, in order.
fn prim_convs(p: Prim, out: &mut Vec<Conv>) {
    match p {
        Prim::I8 | Prim::U8 | Prim::Bool | Prim::Byte => out.push(Conv::Copy(1)),
        Prim::I16 | Prim::U16 => out.push(Conv::Swap(2)),
        Prim::I32 | Prim::U32 | Prim::F32 | Prim::Logical4 => out.push(Conv::Swap(4)),
        Prim::I64 | Prim::U64 | Prim::F64 => out.push(Conv::Swap(8)),
        Prim::C32 => out.extend([Conv::Swap(4); 2]),
        Prim::C64 => out.extend([Conv::Swap(8); 2]),
        Prim::LongDouble => out.push(long_double_conv()),
        Prim::CLongDouble => out.extend([long_double_conv(); 2]),
        Prim::Pair(k) => {
            out.push(match k {
                PairKind::LongDouble => long_double_conv(),
                k => Conv::Swap(k.value_size()),
            });
            out.push(Conv::Swap(k.index_size()));
        }
        Prim::Opaque(1) => out.push(Conv::Copy(1)),
        Prim::Opaque(n) => out.push(Conv::Swap(usize::from(n))),
    }
}

/// The conversions of one element of `dt`.
fn element_convs(dt: MPI_Datatype, t: &Typed) -> Vec<Conv> {
    let narrow = |signed| {
        vec![Conv::Narrow {
            native: 8,
            ext: 4,
            signed,
        }]
    };
    match dt {
        MPI_LONG => return narrow(true),
        MPI_UNSIGNED_LONG => return narrow(false),
        MPI_WCHAR => {
            return vec![Conv::Narrow {
                native: 4,
                ext: 2,
                signed: false,
            }]
        }
        MPI_COMPLEX4 => return vec![Conv::Swap(2); 2],
        MPI_COMPLEX32 => return vec![Conv::Swap(16); 2],
        _ => {}
    }
    let mut out = Vec::new();
    for &(p, n) in &t.layout.prims {
        let mut one = Vec::new();
        prim_convs(p, &mut one);
        for _ in 0..n {
            out.extend_from_slice(&one);
        }
    }
    out
}

fn ext_size(convs: &[Conv]) -> usize {
    convs.iter().map(|c| c.ext()).sum()
}

/// x87 extended (little-endian, 10 significant bytes of 16) to IEEE
/// binary128 big-endian.
fn x87_to_binary128(native: &[u8], ext: &mut [u8]) {
    let mantissa = u64::from_le_bytes(native[0..8].try_into().unwrap());
    let sign_exp = u16::from_le_bytes([native[8], native[9]]);
    // binary128: sign and the same 15-bit exponent (bias 16383), then 112
    // fraction bits; x87 has an explicit integer bit and 63 fraction bits.
    let fraction = u128::from(mantissa & (u64::MAX >> 1)) << 49;
    let bits = (u128::from(sign_exp) << 112) | fraction;
    ext.copy_from_slice(&bits.to_be_bytes());
}

fn binary128_to_x87(ext: &[u8], native: &mut [u8]) {
    let bits = u128::from_be_bytes(ext.try_into().unwrap());
    let sign_exp = (bits >> 112) as u16;
    let exponent = sign_exp & 0x7fff;
    let fraction = ((bits >> 49) as u64) & (u64::MAX >> 1);
    // The explicit integer bit: set for normal numbers, infinities and NaNs.
    let integer = if exponent != 0 { 1u64 << 63 } else { 0 };
    native.fill(0);
    native[0..8].copy_from_slice(&(integer | fraction).to_le_bytes());
    native[8..10].copy_from_slice(&sign_exp.to_le_bytes());
}

fn to_external(c: Conv, native: &[u8], ext: &mut [u8]) {
    match c {
        Conv::Copy(_) => ext.copy_from_slice(native),
        Conv::Swap(n) => {
            for i in 0..n {
                ext[i] = native[n - 1 - i];
            }
        }
        Conv::LongDouble => x87_to_binary128(native, ext),
        Conv::Narrow { ext: e, .. } => {
            // Little-endian: the low bytes come first.
            for i in 0..e {
                ext[i] = native[e - 1 - i];
            }
        }
    }
}

fn from_external(c: Conv, ext: &[u8], native: &mut [u8]) {
    match c {
        Conv::Copy(_) => native.copy_from_slice(ext),
        Conv::Swap(n) => {
            for i in 0..n {
                native[i] = ext[n - 1 - i];
            }
        }
        Conv::LongDouble => binary128_to_x87(ext, native),
        Conv::Narrow {
            native: n,
            ext: e,
            signed,
        } => {
            for i in 0..e {
                native[i] = ext[e - 1 - i];
            }
            let negative = signed && ext[0] & 0x80 != 0;
            native[e..n].fill(if negative { 0xff } else { 0 });
        }
    }
}

/// The external32 conversions of one element of `dt` (laid out as `t`)
/// when every primitive keeps its native size in external32, so that data
/// laid out natively (a file view) is laid out right for external32 too;
/// `None` when some primitive changes size (`MPI_LONG`, `MPI_WCHAR`).
pub(crate) fn same_size_convs(dt: MPI_Datatype, t: &Typed) -> Option<Vec<Conv>> {
    let convs = element_convs(dt, t);
    convs.iter().all(|c| c.native() == c.ext()).then_some(convs)
}

/// The external32 size of one element of `dt`.
pub(crate) fn external_size_of(dt: MPI_Datatype, t: &Typed) -> usize {
    ext_size(&element_convs(dt, t))
}

/// Converts whole elements of packed native data to external32 in place
/// (`convs` from [`same_size_convs`]); a trailing part element is left.
pub(crate) fn to_external_in_place(convs: &[Conv], data: &mut [u8]) {
    convert_in_place(convs, data, to_external);
}

/// Converts whole elements of external32 data to packed native in place.
pub(crate) fn from_external_in_place(convs: &[Conv], data: &mut [u8]) {
    convert_in_place(convs, data, from_external);
}

fn convert_in_place(convs: &[Conv], data: &mut [u8], f: fn(Conv, &[u8], &mut [u8])) {
    let elem = ext_size(convs);
    if elem == 0 {
        return;
    }
    let mut tmp = [0u8; 16];
    for e in data.chunks_exact_mut(elem) {
        let mut at = 0;
        for &c in convs {
            let n = c.native();
            tmp[..n].copy_from_slice(&e[at..at + n]);
            f(c, &tmp[..n], &mut e[at..at + n]);
            at += n;
        }
    }
}

/// Checks the data representation argument.
///
/// # Safety
/// `datarep` is null or a C string.
unsafe fn datarep_arg(datarep: *const c_char) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, datarep.cast_mut(), "datarep")?;
    // SAFETY: a C string by the MPI contract.
    let name = unsafe { std::ffi::CStr::from_ptr(datarep) };
    if name.to_bytes() == b"external32" {
        Ok(())
    } else {
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!(
                "data representation {:?}: only \"external32\" is defined for packing",
                name.to_string_lossy()
            ),
        ))
    }
}

fn count_of(n: i64, what: &str) -> Result<c_int, Fail> {
    if n < 0 {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("negative {what} {n}"),
        ));
    }
    c_int::try_from(n).map_err(|_| {
        Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("{what} {n} is beyond what Tandem's buffers take (2^31 - 1)"),
        )
    })
}

/// Where the data goes or comes from: `[pos, pos + len)` within `size`.
fn window(pos: i64, len: usize, size: i64, what: &str) -> Result<usize, Fail> {
    usize::try_from(pos)
        .ok()
        .and_then(|p| p.checked_add(len))
        .filter(|&end| end as u64 <= size.max(0) as u64)
        .map(|end| end - len)
        .ok_or_else(|| {
            Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Truncate,
                format!("{len} bytes do not fit at position {pos} of a {what} of {size}"),
            )
        })
}

unsafe fn pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: i64,
) -> Result<i64, Fail> {
    // SAFETY: the caller's promise.
    unsafe { datarep_arg(datarep)? };
    let t = typed(
        MPI_COMM_WORLD,
        inbuf,
        count_of(incount, "incount")?,
        datatype,
    )?;
    let convs = element_convs(datatype, &t);
    let len = ext_size(&convs) * t.count;
    let start = window(position, len, outsize, "buffer")?;
    if len > 0 {
        args::out_ptr(MPI_COMM_WORLD, outbuf, "outbuf")?;
        // SAFETY: the input is valid as its datatype describes (MPI
        // contract); the output holds `outsize >= start + len` bytes.
        let (native, out) = unsafe {
            (
                t.pack(),
                std::slice::from_raw_parts_mut(outbuf.cast::<u8>().add(start), len),
            )
        };
        let (mut i, mut o) = (0, 0);
        for _ in 0..t.count {
            for &c in &convs {
                to_external(c, &native[i..i + c.native()], &mut out[o..o + c.ext()]);
                i += c.native();
                o += c.ext();
            }
        }
    }
    Ok((start + len) as i64)
}

unsafe fn unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: i64,
    position: i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
) -> Result<i64, Fail> {
    // SAFETY: the caller's promise.
    unsafe { datarep_arg(datarep)? };
    let t = typed(
        MPI_COMM_WORLD,
        outbuf,
        count_of(outcount, "outcount")?,
        datatype,
    )?;
    let convs = element_convs(datatype, &t);
    let len = ext_size(&convs) * t.count;
    let start = window(position, len, insize, "buffer")?;
    if len > 0 {
        args::out_ptr(MPI_COMM_WORLD, inbuf.cast_mut(), "inbuf")?;
        // SAFETY: `inbuf` holds `insize >= start + len` bytes.
        let ext = unsafe { std::slice::from_raw_parts(inbuf.cast::<u8>().add(start), len) };
        let mut native = vec![0u8; t.bytes()];
        let (mut i, mut o) = (0, 0);
        for _ in 0..t.count {
            for &c in &convs {
                from_external(c, &ext[i..i + c.ext()], &mut native[o..o + c.native()]);
                i += c.ext();
                o += c.native();
            }
        }
        // SAFETY: the output is valid as its datatype describes (MPI contract).
        unsafe { t.unpack(&native) };
    }
    Ok((start + len) as i64)
}

unsafe fn external_size(
    datarep: *const c_char,
    incount: i64,
    datatype: MPI_Datatype,
) -> Result<i64, Fail> {
    // SAFETY: the caller's promise.
    unsafe { datarep_arg(datarep)? };
    if incount < 0 {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("negative incount {incount}"),
        ));
    }
    let t = Typed {
        ptr: std::ptr::null_mut(),
        count: 1,
        layout: layout(MPI_COMM_WORLD, datatype)?,
    };
    let one = ext_size(&element_convs(datatype, &t)) as i64;
    one.checked_mul(incount).ok_or_else(|| {
        Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            "the packed size overflows",
        )
    })
}

/// Reads a position argument.
///
/// # Safety
/// `p` is null or valid for reads.
unsafe fn read_position<T: Copy + Into<i64>>(p: *mut T) -> Result<i64, Fail> {
    args::out_ptr(MPI_COMM_WORLD, p, "position")?;
    // SAFETY: checked non-null; the caller's promise.
    Ok(unsafe { *p }.into())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    call_local("MPI_Pack_external", || {
        // SAFETY: the MPI contract on every argument.
        unsafe {
            let pos = read_position(position.cast::<i64>())?;
            let end = pack_external(
                datarep,
                inbuf,
                incount.into(),
                datatype,
                outbuf,
                outsize as i64,
                pos,
            )?;
            put(position, end as MPI_Aint);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    call_local("MPI_Pack_external_c", || {
        // SAFETY: the MPI contract on every argument.
        unsafe {
            let pos = read_position(position)?;
            let end = pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, pos)?;
            put(position, end);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    call_local("MPI_Unpack_external", || {
        // SAFETY: the MPI contract on every argument.
        unsafe {
            let pos = read_position(position.cast::<i64>())?;
            let end = unpack_external(
                datarep,
                inbuf,
                insize as i64,
                pos,
                outbuf,
                outcount.into(),
                datatype,
            )?;
            put(position, end as MPI_Aint);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    call_local("MPI_Unpack_external_c", || {
        // SAFETY: the MPI contract on every argument.
        unsafe {
            let pos = read_position(position)?;
            let end = unpack_external(datarep, inbuf, insize, pos, outbuf, outcount, datatype)?;
            put(position, end);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
) -> c_int {
    call_local("MPI_Pack_external_size", || {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        // SAFETY: the MPI contract; `size` checked non-null.
        unsafe {
            let n = external_size(datarep, incount.into(), datatype)?;
            put(size, n as MPI_Aint);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    call_local("MPI_Pack_external_size_c", || {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        // SAFETY: the MPI contract; `size` checked non-null.
        unsafe {
            let n = external_size(datarep, incount, datatype)?;
            put(size, n);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_double_converts_both_ways() {
        // 1.5 as x87: integer bit and the top fraction bit, exponent 16383.
        let mut x87 = [0u8; 16];
        x87[0..8].copy_from_slice(&0xc000_0000_0000_0000u64.to_le_bytes());
        x87[8..10].copy_from_slice(&0x3fffu16.to_le_bytes());
        let mut q = [0u8; 16];
        x87_to_binary128(&x87, &mut q);
        // binary128 1.5: 0x3fff8000...0
        assert_eq!(q[0], 0x3f);
        assert_eq!(q[1], 0xff);
        assert_eq!(q[2], 0x80);
        assert!(q[3..].iter().all(|&b| b == 0));
        let mut back = [0xaau8; 16];
        binary128_to_x87(&q, &mut back);
        assert_eq!(back[..10], x87[..10]);
    }

    #[test]
    fn narrow_integers_keep_their_sign() {
        let c = Conv::Narrow {
            native: 8,
            ext: 4,
            signed: true,
        };
        let mut e = [0u8; 4];
        to_external(c, &(-2i64).to_le_bytes(), &mut e);
        assert_eq!(e, (-2i32).to_be_bytes());
        let mut n = [0u8; 8];
        from_external(c, &e, &mut n);
        assert_eq!(i64::from_le_bytes(n), -2);
    }
}
