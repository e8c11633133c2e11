//! Datatypes: the predefined ones (mapped to the core's primitives) and the
//! derived ones (made in `datatype_ctor` and `datatype_dist`), kept
//! in a process-wide registry; their queries, `MPI_Pack`/`MPI_Unpack`, and
//! [`Typed`], the buffer description every communication function uses.
//!
//! Derived datatype handles are `USER_TYPE_BASE + index`, far from the
//! predefined handles (all below 0x300), so the two can never be confused.
//!
//! Data moves packed. A datatype whose element is one contiguous run as wide
//! as its extent (every predefined type but the padded value-index pairs,
//! contiguous and most struct types) is sent from and received into the
//! user's buffer directly; any other is packed into a staging buffer on the
//! send side and unpacked from one on the receive side (one copy each).
//!
//! Safety contract of every exported function: pointer arguments are valid
//! as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use tandem::datatype::{Layout, PairKind, Prim};
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::state::{call, call_local, Fail};

/// First handle of derived datatypes.
pub const USER_TYPE_BASE: usize = 0x0100_0000;

/// The primitive behind a predefined datatype handle.
pub fn predefined_prim(dt: MPI_Datatype) -> Option<Prim> {
    let char_signed = c_char::MIN != 0;
    Some(match dt {
        MPI_AINT | MPI_COUNT | MPI_OFFSET => Prim::I64,
        MPI_PACKED | MPI_BYTE => Prim::Byte,
        MPI_SHORT => Prim::I16,
        MPI_INT => Prim::I32,
        MPI_LONG | MPI_LONG_LONG => Prim::I64,
        MPI_UNSIGNED_SHORT => Prim::U16,
        MPI_UNSIGNED => Prim::U32,
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG => Prim::U64,
        MPI_FLOAT => Prim::F32,
        MPI_DOUBLE => Prim::F64,
        MPI_LONG_DOUBLE => Prim::LongDouble,
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX => Prim::C32,
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX => Prim::C64,
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => Prim::CLongDouble,
        MPI_LOGICAL | MPI_LOGICAL4 => Prim::Logical4,
        MPI_INTEGER | MPI_INTEGER4 => Prim::I32,
        MPI_REAL | MPI_REAL4 => Prim::F32,
        MPI_COMPLEX | MPI_COMPLEX8 => Prim::C32,
        MPI_DOUBLE_PRECISION | MPI_REAL8 => Prim::F64,
        MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => Prim::C64,
        MPI_CHARACTER => Prim::Opaque(1),
        MPI_FLOAT_INT => Prim::Pair(PairKind::F32),
        MPI_DOUBLE_INT => Prim::Pair(PairKind::F64),
        MPI_LONG_INT => Prim::Pair(PairKind::I64),
        MPI_2INT | MPI_2INTEGER => Prim::Pair(PairKind::I32),
        MPI_SHORT_INT => Prim::Pair(PairKind::I16),
        MPI_LONG_DOUBLE_INT => Prim::Pair(PairKind::LongDouble),
        MPI_2REAL => Prim::Pair(PairKind::RealReal),
        MPI_2DOUBLE_PRECISION => Prim::Pair(PairKind::DoubleDouble),
        MPI_C_BOOL | MPI_CXX_BOOL | MPI_LOGICAL1 => Prim::Bool,
        MPI_WCHAR => Prim::I32,
        MPI_INT8_T | MPI_SIGNED_CHAR | MPI_INTEGER1 => Prim::I8,
        MPI_CHAR if char_signed => Prim::I8,
        MPI_CHAR | MPI_UINT8_T | MPI_UNSIGNED_CHAR => Prim::U8,
        MPI_INT16_T | MPI_INTEGER2 | MPI_LOGICAL2 => Prim::I16,
        MPI_UINT16_T => Prim::U16,
        MPI_INT32_T => Prim::I32,
        MPI_UINT32_T => Prim::U32,
        MPI_INT64_T | MPI_INTEGER8 | MPI_LOGICAL8 => Prim::I64,
        MPI_UINT64_T => Prim::U64,
        MPI_REAL2 | MPI_COMPLEX4 => Prim::Opaque(if dt == MPI_REAL2 { 2 } else { 4 }),
        MPI_LOGICAL16 | MPI_INTEGER16 | MPI_REAL16 => Prim::Opaque(16),
        MPI_COMPLEX32 => Prim::Opaque(32),
        _ => return None,
    })
}

const PREDEF_LIMIT: usize = 0x300;

fn predefined_layouts() -> &'static [Option<Arc<Layout>>] {
    static TABLE: OnceLock<Vec<Option<Arc<Layout>>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..PREDEF_LIMIT)
            .map(|h| predefined_prim(h).map(|p| Arc::new(Layout::prim(p))))
            .collect()
    })
}

/// How a derived datatype was made (`MPI_Type_get_envelope`/`_contents`).
#[derive(Clone, Debug, Default)]
pub struct Contents {
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub aints: Vec<MPI_Aint>,
    /// The counts of a large-count (`_c`) constructor (MPI-4).
    pub large: Vec<MPI_Count>,
    pub types: Vec<MPI_Datatype>,
}

struct Entry {
    layout: Arc<Layout>,
    committed: bool,
    name: String,
    contents: Contents,
    /// The derived constituents in `contents.types` as they were when this
    /// type was made (`None` for predefined ones): a constituent's handle
    /// may be freed, and its number reused, while this type lives on, and
    /// `MPI_Type_get_contents` must still describe what it was made of.
    kept: Vec<Option<Arc<Constituent>>>,
}

/// A derived datatype as a type made from it keeps it.
struct Constituent {
    layout: Arc<Layout>,
    committed: bool,
    contents: Contents,
    kept: Vec<Option<Arc<Constituent>>>,
}

static TYPES: Mutex<Vec<Option<Entry>>> = Mutex::new(Vec::new());

fn types() -> std::sync::MutexGuard<'static, Vec<Option<Entry>>> {
    TYPES.lock().unwrap_or_else(|p| p.into_inner())
}

fn type_error(comm: MPI_Comm, dt: MPI_Datatype) -> Fail {
    let what = if dt == MPI_DATATYPE_NULL {
        "MPI_DATATYPE_NULL is not a datatype".to_string()
    } else {
        format!("invalid datatype handle {dt:#x}")
    };
    Fail::new(comm, ErrorClass::Type, what)
}

/// The layout of any valid datatype (committed or not).
pub fn layout_any(comm: MPI_Comm, dt: MPI_Datatype) -> Result<Arc<Layout>, Fail> {
    if dt < PREDEF_LIMIT {
        return predefined_layouts()[dt]
            .clone()
            .ok_or_else(|| type_error(comm, dt));
    }
    let i = dt.wrapping_sub(USER_TYPE_BASE);
    types()
        .get(i)
        .and_then(Option::as_ref)
        .map(|e| e.layout.clone())
        .ok_or_else(|| type_error(comm, dt))
}

/// The layout of a datatype that may be used in communication (committed).
pub fn layout(comm: MPI_Comm, dt: MPI_Datatype) -> Result<Arc<Layout>, Fail> {
    if dt < PREDEF_LIMIT {
        return layout_any(comm, dt);
    }
    let i = dt.wrapping_sub(USER_TYPE_BASE);
    match types().get(i).and_then(Option::as_ref) {
        Some(e) if e.committed => Ok(e.layout.clone()),
        Some(_) => Err(Fail::new(
            comm,
            ErrorClass::Type,
            format!("datatype {dt:#x} is not committed (MPI_Type_commit)"),
        )),
        None => Err(type_error(comm, dt)),
    }
}

/// Bytes of `count` elements of `elem` bytes at `buf`, checked as
/// [`typed`] checks a buffer of a predefined datatype.
#[inline(always)]
pub fn packed_len(
    comm: MPI_Comm,
    buf: *const c_void,
    count: MPI_Count,
    elem: usize,
) -> Result<usize, Fail> {
    let Some(len) = usize::try_from(count)
        .ok()
        .and_then(|n| n.checked_mul(elem))
        .filter(|&len| len <= isize::MAX as usize)
    else {
        return Err(Fail::new(
            comm,
            ErrorClass::Count,
            if count < 0 {
                format!("negative count {count}")
            } else {
                format!("count {count} of {elem}-byte elements is more than memory holds")
            },
        ));
    };
    if len > 0 && buf.is_null() {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            format!("NULL buffer for {count} elements"),
        ));
    }
    Ok(len)
}

/// Bytes per element of a predefined datatype whose elements lie packed in
/// memory, one after the other (every predefined type but the padded
/// value-index pairs): the point-to-point fast paths move such buffers as
/// bytes. `None` for every other handle.
#[inline]
pub fn packed_predefined(dt: MPI_Datatype) -> Option<usize> {
    static SIZES: OnceLock<Vec<u8>> = OnceLock::new();
    let sizes = SIZES.get_or_init(|| {
        predefined_layouts()
            .iter()
            .map(|l| match l {
                Some(l)
                    if l.contiguous_at() == Some(0)
                        && l.size as isize == l.extent
                        && (1..=u8::MAX as usize).contains(&l.size) =>
                {
                    l.size as u8
                }
                _ => 0,
            })
            .collect()
    });
    match sizes.get(dt) {
        Some(&n) if n > 0 => Some(usize::from(n)),
        _ => None,
    }
}

/// Whether `dt` is a predefined datatype.
pub fn is_predefined(dt: MPI_Datatype) -> bool {
    dt < PREDEF_LIMIT && predefined_layouts()[dt].is_some()
}

/// A checked buffer description: `count` elements of a datatype at `ptr`.
#[derive(Clone)]
pub struct Typed {
    pub ptr: *mut u8,
    pub count: usize,
    pub layout: Arc<Layout>,
}

impl Typed {
    /// Bytes of packed data.
    pub fn bytes(&self) -> usize {
        self.layout.size * self.count
    }

    /// The address of the packed data if it is the user's memory itself.
    pub fn direct(&self) -> Option<*mut u8> {
        self.layout
            .contiguous_at()
            .map(|off| self.ptr.wrapping_offset(off))
    }

    /// The data packed (a copy).
    ///
    /// # Safety
    /// The buffer must be valid for reads as the datatype describes.
    pub unsafe fn pack(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // SAFETY: the caller's promise.
        unsafe { self.layout.pack(self.ptr, self.count, &mut out) };
        out
    }

    /// Unpacks `data` (a prefix of the elements if shorter).
    ///
    /// # Safety
    /// The buffer must be valid for writes as the datatype describes.
    pub unsafe fn unpack(&self, data: &[u8]) {
        // SAFETY: the caller's promise.
        unsafe { self.layout.unpack(data, self.ptr, self.count) };
    }

    /// The same datatype, `count` elements `index * count` elements further on.
    pub fn block(&self, index: usize, count: usize) -> Typed {
        Typed {
            ptr: self
                .ptr
                .wrapping_offset(index as isize * count as isize * self.layout.extent),
            count,
            ..self.clone()
        }
    }

    /// The same datatype at `displ` extents from the start.
    pub fn at(&self, displ: isize, count: usize) -> Typed {
        Typed {
            ptr: self.ptr.wrapping_offset(displ * self.layout.extent),
            count,
            ..self.clone()
        }
    }
}

/// Checks a buffer description (count, datatype, NULL with data).
pub fn typed(
    comm: MPI_Comm,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
) -> Result<Typed, Fail> {
    if count < 0 {
        return Err(Fail::new(
            comm,
            ErrorClass::Count,
            format!("negative count {count}"),
        ));
    }
    // No data described with MPI_DATATYPE_NULL: the standard leaves it
    // undefined, MPICH accepts it and programs written against MPICH use it
    // (`MPI_Send(NULL, 0, MPI_DATATYPE_NULL, ...)` as a bare signal).
    let layout = if count == 0 && dt == MPI_DATATYPE_NULL {
        no_data_layout()
    } else {
        layout(comm, dt)?
    };
    let t = Typed {
        ptr: buf as *mut u8,
        count: count as usize,
        layout,
    };
    if t.count.checked_mul(t.layout.size).is_none() {
        return Err(Fail::new(
            comm,
            ErrorClass::Count,
            "count times datatype size overflows",
        ));
    }
    // Derived datatypes may address absolute memory from MPI_BOTTOM (NULL).
    if t.bytes() > 0 && buf.is_null() && is_predefined(dt) {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            format!("NULL buffer for {count} elements"),
        ));
    }
    Ok(t)
}

/// The layout of zero elements of nothing: size and extent 0, no blocks.
fn no_data_layout() -> Arc<Layout> {
    static EMPTY: OnceLock<Arc<Layout>> = OnceLock::new();
    EMPTY
        .get_or_init(|| {
            Arc::new(
                Layout::contiguous(0, &Layout::prim(Prim::I8))
                    .expect("zero copies of a byte are a valid layout"),
            )
        })
        .clone()
}

/// Bytes of packed data per element.
pub fn packed_size(comm: MPI_Comm, dt: MPI_Datatype) -> Result<usize, Fail> {
    Ok(layout(comm, dt)?.size)
}

pub(crate) fn register(layout: Layout, contents: Contents) -> MPI_Datatype {
    let mut t = types();
    let kept = contents
        .types
        .iter()
        .map(|&c| {
            if is_predefined(c) {
                return None;
            }
            let e = t.get(c.wrapping_sub(USER_TYPE_BASE))?.as_ref()?;
            Some(Arc::new(Constituent {
                layout: e.layout.clone(),
                committed: e.committed,
                contents: e.contents.clone(),
                kept: e.kept.clone(),
            }))
        })
        .collect();
    let entry = Entry {
        layout: Arc::new(layout),
        committed: false,
        name: String::new(),
        contents,
        kept,
    };
    insert(&mut t, entry)
}

/// Puts `entry` in the first free slot; its handle.
fn insert(t: &mut Vec<Option<Entry>>, entry: Entry) -> MPI_Datatype {
    let i = match t.iter().position(Option::is_none) {
        Some(i) => {
            t[i] = Some(entry);
            i
        }
        None => {
            t.push(Some(entry));
            t.len() - 1
        }
    };
    USER_TYPE_BASE + i
}

/// [`register`] for datatypes that need no `MPI_Type_commit` (the
/// `MPI_Type_create_f90_*` types, predefined by the standard).
/// The handle `MPI_Type_get_contents` gives for constituent `i` of derived
/// datatype `dt`: a predefined type is itself; a derived one is a new
/// handle made alike (layout, contents, commit state) from what `dt` kept
/// of it, as Open MPI does, which the caller owns and frees, as the
/// standard asks, without touching any type the program holds.
pub(crate) fn handed_out(dt: MPI_Datatype, i: usize) -> MPI_Datatype {
    let mut t = types();
    let Some(e) = t
        .get(dt.wrapping_sub(USER_TYPE_BASE))
        .and_then(Option::as_ref)
    else {
        return MPI_DATATYPE_NULL;
    };
    let given = e
        .contents
        .types
        .get(i)
        .copied()
        .unwrap_or(MPI_DATATYPE_NULL);
    let Some(Some(c)) = e.kept.get(i).cloned() else {
        return given;
    };
    let entry = Entry {
        layout: c.layout.clone(),
        committed: c.committed,
        name: String::new(),
        contents: c.contents.clone(),
        kept: c.kept.clone(),
    };
    insert(&mut t, entry)
}

pub(crate) fn register_committed(layout: Layout, contents: Contents) -> MPI_Datatype {
    let h = register(layout, contents);
    if let Some(Some(e)) = types().get_mut(h - USER_TYPE_BASE) {
        e.committed = true;
    }
    h
}

/// Reads `n` entries of a C array (an empty slice when `n == 0`).
///
/// # Safety
/// `p` must be valid for `n` reads when `n > 0`.
pub(crate) unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], Fail> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!("NULL {what} array"),
        ));
    }
    // No array that long can exist (a 64-bit count from a `_c` call can
    // ask for one): refused before a slice is formed over it.
    if n > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("{what} array of {n} entries"),
        ));
    }
    // SAFETY: the caller's promise; the length fits the address space.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

pub(crate) fn build_error(e: String) -> Fail {
    Fail::new(MPI_COMM_WORLD, ErrorClass::Arg, e)
}

/// Stores a new datatype in `*newtype`.
pub(crate) fn create(
    newtype: *mut MPI_Datatype,
    build: impl FnOnce() -> Result<(Layout, Contents), Fail>,
) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, newtype, "newtype")?;
    let (layout, contents) = build()?;
    let h = register(layout, contents);
    // SAFETY: checked non-null.
    unsafe { put(newtype, h) };
    Ok(())
}

pub(crate) fn contents(
    combiner: c_int,
    ints: &[c_int],
    aints: &[MPI_Aint],
    types: &[MPI_Datatype],
) -> Contents {
    Contents {
        combiner,
        ints: ints.to_vec(),
        aints: aints.to_vec(),
        large: Vec::new(),
        types: types.to_vec(),
    }
}

/// What derived datatype `dt` was made from.
pub(crate) fn entry_contents(dt: MPI_Datatype) -> Result<Contents, Fail> {
    let i = user_index(dt)?;
    Ok(types()[i]
        .as_ref()
        .map(|e| e.contents.clone())
        .unwrap_or_default())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    // Attributes are copied by their callbacks, outside the library.
    crate::attr::duplicate(
        "MPI_Type_dup",
        crate::attr::Kind::Type,
        oldtype,
        |_| {
            args::out_ptr(MPI_COMM_WORLD, newtype, "newtype")?;
            let old = layout_any(MPI_COMM_WORLD, oldtype)?;
            let committed = is_predefined(oldtype)
                || types()
                    .get(oldtype.wrapping_sub(USER_TYPE_BASE))
                    .and_then(Option::as_ref)
                    .is_some_and(|e| e.committed);
            let h = register(
                (*old).clone(),
                contents(MPI_COMBINER_DUP, &[], &[], &[oldtype]),
            );
            if committed {
                if let Some(Some(e)) = types().get_mut(h - USER_TYPE_BASE) {
                    e.committed = true;
                }
            }
            // SAFETY: checked non-null.
            unsafe { put(newtype, h) };
            Ok(h)
        },
        |_, h| {
            if let Some(e) = types().get_mut(h - USER_TYPE_BASE) {
                *e = None;
            }
            // SAFETY: checked non-null before the duplicate was made.
            unsafe { put(newtype, MPI_DATATYPE_NULL) };
        },
    )
}

/// The registry entry of a derived datatype handle.
/// A committed copy of datatype `dt` with the same layout and constructor
/// (for MPI-IO views, which keep their types however the application frees
/// its handles); predefined types are returned as they are.
pub(crate) fn duplicate(comm: MPI_Comm, dt: MPI_Datatype) -> Result<MPI_Datatype, Fail> {
    if is_predefined(dt) {
        return Ok(dt);
    }
    let (layout, contents) = {
        let t = types();
        let e = t
            .get(dt.wrapping_sub(USER_TYPE_BASE))
            .and_then(Option::as_ref)
            .ok_or_else(|| type_error(comm, dt))?;
        ((*e.layout).clone(), e.contents.clone())
    };
    let h = register(layout, contents);
    if let Some(Some(e)) = types().get_mut(h - USER_TYPE_BASE) {
        e.committed = true;
    }
    Ok(h)
}

/// Frees a copy made by [`duplicate`] (predefined types stay).
pub(crate) fn release(dt: MPI_Datatype) {
    if is_predefined(dt) {
        return;
    }
    if let Some(slot) = types().get_mut(dt.wrapping_sub(USER_TYPE_BASE)) {
        *slot = None;
    }
}

fn user_index(dt: MPI_Datatype) -> Result<usize, Fail> {
    let i = dt.wrapping_sub(USER_TYPE_BASE);
    if types().get(i).and_then(Option::as_ref).is_some() {
        Ok(i)
    } else {
        Err(type_error(MPI_COMM_WORLD, dt))
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    call_local("MPI_Type_commit", || {
        args::out_ptr(MPI_COMM_WORLD, datatype, "datatype")?;
        // SAFETY: checked non-null.
        let dt = unsafe { *datatype };
        if is_predefined(dt) {
            return Ok(());
        }
        let i = user_index(dt)?;
        if let Some(Some(e)) = types().get_mut(i) {
            e.committed = true;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    let dt = if datatype.is_null() {
        MPI_DATATYPE_NULL
    } else {
        // SAFETY: checked non-null.
        unsafe { *datatype }
    };
    let freeable = || -> Result<usize, Fail> {
        args::out_ptr(MPI_COMM_WORLD, datatype, "datatype")?;
        if is_predefined(dt) {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Type,
                "predefined datatypes cannot be freed",
            ));
        }
        user_index(dt)
    };
    // Delete callbacks run first, outside the library (see attr.rs).
    crate::attr::free_object(
        "MPI_Type_free",
        crate::attr::Kind::Type,
        dt,
        |_| freeable().map(drop),
        |_| {
            let i = freeable()?;
            // Operations in flight keep their own reference to the layout.
            types()[i] = None;
            // SAFETY: checked non-null.
            unsafe { put(datatype, MPI_DATATYPE_NULL) };
            Ok(())
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    call_local("MPI_Type_size", || {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        let n = layout_any(MPI_COMM_WORLD, datatype)?.size;
        // SAFETY: checked non-null.
        unsafe { put(size, c_int::try_from(n).unwrap_or(MPI_UNDEFINED)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size_c(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    call_local("MPI_Type_size_c", || {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        let n = layout_any(MPI_COMM_WORLD, datatype)?.size;
        // SAFETY: checked non-null.
        unsafe { put(size, n as MPI_Count) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    call_local("MPI_Type_size_x", || {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        let n = layout_any(MPI_COMM_WORLD, datatype)?.size;
        // SAFETY: checked non-null.
        unsafe { put(size, n as MPI_Count) };
        Ok(())
    })
}

/// Writes two `MPI_Count` results of a datatype query (the `_x` forms).
fn put_counts(
    func: &'static str,
    datatype: MPI_Datatype,
    a: *mut MPI_Count,
    b: *mut MPI_Count,
    pick: fn(&Layout) -> (isize, isize),
) -> c_int {
    // Reads only the datatype: allowed inside callbacks (call_local).
    call_local(func, || {
        args::out_ptr(MPI_COMM_WORLD, a, "lb")?;
        args::out_ptr(MPI_COMM_WORLD, b, "extent")?;
        let (x, y) = pick(&*layout_any(MPI_COMM_WORLD, datatype)?);
        // SAFETY: both checked non-null.
        unsafe {
            put(a, x as MPI_Count);
            put(b, y as MPI_Count);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_extent_c(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    put_counts("MPI_Type_get_extent_c", datatype, lb, extent, |l| {
        (l.lb, l.extent)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_true_extent_c(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    put_counts(
        "MPI_Type_get_true_extent_c",
        datatype,
        true_lb,
        true_extent,
        |l| (l.true_lb, l.true_extent),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_extent_x(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    put_counts("MPI_Type_get_extent_x", datatype, lb, extent, |l| {
        (l.lb, l.extent)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_true_extent_x(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    put_counts(
        "MPI_Type_get_true_extent_x",
        datatype,
        true_lb,
        true_extent,
        |l| (l.true_lb, l.true_extent),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    call_local("MPI_Type_get_extent", || {
        args::out_ptr(MPI_COMM_WORLD, lb, "lb")?;
        args::out_ptr(MPI_COMM_WORLD, extent, "extent")?;
        let l = layout_any(MPI_COMM_WORLD, datatype)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(lb, l.lb);
            put(extent, l.extent);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    call_local("MPI_Type_get_true_extent", || {
        args::out_ptr(MPI_COMM_WORLD, true_lb, "true_lb")?;
        args::out_ptr(MPI_COMM_WORLD, true_extent, "true_extent")?;
        let l = layout_any(MPI_COMM_WORLD, datatype)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(true_lb, l.true_lb);
            put(true_extent, l.true_extent);
        }
        Ok(())
    })
}

/// Deprecated MPI-1 form, still called by old programs.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_extent(datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
    call_local("MPI_Type_extent", || {
        args::out_ptr(MPI_COMM_WORLD, extent, "extent")?;
        let l = layout_any(MPI_COMM_WORLD, datatype)?;
        // SAFETY: checked non-null.
        unsafe { put(extent, l.extent) };
        Ok(())
    })
}

fn copy_name(name: &str, out: *mut c_char, resultlen: *mut c_int) {
    let n = name.len().min(MPI_MAX_OBJECT_NAME - 1);
    // SAFETY: the caller checked both pointers; the standard requires
    // MPI_MAX_OBJECT_NAME bytes at `out`.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
        put(resultlen, n as c_int);
    }
}

/// Reads a NUL-terminated C string (at most MPI_MAX_OBJECT_NAME - 1 bytes kept).
///
/// # Safety
/// `s` must be a valid C string.
pub unsafe fn read_name(s: *const c_char) -> String {
    // SAFETY: the caller's promise.
    let text = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy();
    let mut t = text.into_owned();
    while t.len() > MPI_MAX_OBJECT_NAME - 1 {
        t.pop();
    }
    t
}

/// Writes an object name for the `*_get_name` functions.
pub fn write_name(name: &str, out: *mut c_char, resultlen: *mut c_int) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, out, "name")?;
    args::out_ptr(MPI_COMM_WORLD, resultlen, "resultlen")?;
    copy_name(name, out, resultlen);
    Ok(())
}

/// Names the program gave predefined datatypes (few: a list will do).
static PREDEFINED_RENAMES: Mutex<Vec<(MPI_Datatype, String)>> = Mutex::new(Vec::new());

fn rename_predefined(dt: MPI_Datatype, name: String) {
    // Poisoning needs a panic under the lock; nothing under it panics.
    let mut r = PREDEFINED_RENAMES.lock().unwrap_or_else(|p| p.into_inner());
    match r.iter_mut().find(|(d, _)| *d == dt) {
        Some(entry) => entry.1 = name,
        None => r.push((dt, name)),
    }
}

fn predefined_rename(dt: MPI_Datatype) -> Option<String> {
    let r = PREDEFINED_RENAMES.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().find(|(d, _)| *d == dt).map(|(_, n)| n.clone())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_set_name(datatype: MPI_Datatype, name: *const c_char) -> c_int {
    call_local("MPI_Type_set_name", || {
        args::out_ptr(MPI_COMM_WORLD, name as *mut c_char, "name")?;
        // SAFETY: checked non-null; a C string by the MPI contract.
        let text = unsafe { read_name(name) };
        if is_predefined(datatype) {
            // A predefined datatype may be renamed too, as MPI_COMM_WORLD
            // may (MPICH and Open MPI allow both).
            if predefined_datatype_name(datatype).is_none() {
                return Err(type_error(MPI_COMM_WORLD, datatype));
            }
            rename_predefined(datatype, text);
            return Ok(());
        }
        let i = user_index(datatype)?;
        if let Some(Some(e)) = types().get_mut(i) {
            e.name = text;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_name(
    datatype: MPI_Datatype,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call_local("MPI_Type_get_name", || {
        let text = match predefined_datatype_name(datatype) {
            Some(n) => predefined_rename(datatype).unwrap_or_else(|| n.to_string()),
            // MPI-4.1: the null handle has a name too.
            None if datatype == MPI_DATATYPE_NULL => "MPI_DATATYPE_NULL".to_string(),
            None => {
                let i = user_index(datatype)?;
                types()[i]
                    .as_ref()
                    .map(|e| e.name.clone())
                    .unwrap_or_default()
            }
        };
        write_name(&text, name, resultlen)
    })
}

fn elements(status: *const MPI_Status, dt: MPI_Datatype) -> Result<Option<usize>, Fail> {
    args::out_ptr(MPI_COMM_WORLD, status as *mut MPI_Status, "status")?;
    let l = layout_any(MPI_COMM_WORLD, dt)?;
    // SAFETY: checked non-null; valid by the MPI contract.
    let bytes = args::status_bytes(unsafe { &*status });
    Ok(l.elements_in(bytes as usize))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_elements(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    call_local("MPI_Get_elements", || {
        args::out_ptr(MPI_COMM_WORLD, count, "count")?;
        let n = elements(status, datatype)?;
        let v = n
            .and_then(|n| c_int::try_from(n).ok())
            .unwrap_or(MPI_UNDEFINED);
        // SAFETY: checked non-null.
        unsafe { put(count, v) };
        Ok(())
    })
}

/// `MPI_Get_elements_x` and `MPI_Get_elements_c`: the 64-bit element count.
fn elements_wide(
    func: &'static str,
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    call_local(func, || {
        args::out_ptr(MPI_COMM_WORLD, count, "count")?;
        let n = elements(status, datatype)?;
        // SAFETY: checked non-null.
        unsafe {
            put(
                count,
                n.map_or(MPI_UNDEFINED as MPI_Count, |n| n as MPI_Count),
            )
        };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_elements_x(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    elements_wide("MPI_Get_elements_x", status, datatype, count)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_elements_c(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    elements_wide("MPI_Get_elements_c", status, datatype, count)
}

/// The bytes `incount` elements of `datatype` pack into.
fn pack_bytes(
    s: &mut crate::state::State,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> Result<usize, Fail> {
    args::comm(s, comm)?;
    let n = usize::try_from(incount).map_err(|_| {
        Fail::new(
            comm,
            ErrorClass::Count,
            format!("negative incount {incount}"),
        )
    })?;
    Ok(layout(comm, datatype)?.size.saturating_mul(n))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_size(
    incount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut c_int,
) -> c_int {
    call("MPI_Pack_size", |s| {
        let bytes = pack_bytes(s, incount.into(), datatype, comm)?;
        args::out_ptr(comm, size, "size")?;
        // SAFETY: checked non-null.
        unsafe { put(size, c_int::try_from(bytes).unwrap_or(MPI_UNDEFINED)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut MPI_Count,
) -> c_int {
    call("MPI_Pack_size_c", |s| {
        let bytes = pack_bytes(s, incount, datatype, comm)?;
        args::out_ptr(comm, size, "size")?;
        // SAFETY: checked non-null.
        unsafe { put(size, MPI_Count::try_from(bytes).unwrap_or(MPI_Count::MAX)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Pack", |s| {
        args::comm(s, comm)?;
        args::out_ptr(comm, position, "position")?;
        let t = typed(comm, inbuf, incount, datatype)?;
        // SAFETY: checked non-null.
        let pos = unsafe { *position };
        let end = usize::try_from(pos)
            .ok()
            .and_then(|p| p.checked_add(t.bytes()))
            .filter(|&e| e <= outsize.max(0) as usize)
            .ok_or_else(|| {
                Fail::new(
                    comm,
                    ErrorClass::Truncate,
                    format!(
                        "{} bytes do not fit at position {pos} of {outsize}",
                        t.bytes()
                    ),
                )
            })?;
        if t.bytes() > 0 {
            args::out_ptr(comm, outbuf, "outbuf")?;
            // SAFETY: the input is valid as described (MPI contract); the
            // output has room for `end <= outsize` bytes.
            unsafe {
                let data = t.pack();
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    outbuf.cast::<u8>().add(pos as usize),
                    data.len(),
                );
            }
        }
        // SAFETY: checked non-null.
        unsafe { put(position, end as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Unpack", |s| {
        args::comm(s, comm)?;
        args::out_ptr(comm, position, "position")?;
        let t = typed(comm, outbuf, outcount, datatype)?;
        // SAFETY: checked non-null.
        let pos = unsafe { *position };
        let end = usize::try_from(pos)
            .ok()
            .and_then(|p| p.checked_add(t.bytes()))
            .filter(|&e| e <= insize.max(0) as usize)
            .ok_or_else(|| {
                Fail::new(
                    comm,
                    ErrorClass::Truncate,
                    format!(
                        "{} bytes are not there at position {pos} of {insize}",
                        t.bytes()
                    ),
                )
            })?;
        if t.bytes() > 0 {
            args::out_ptr(comm, inbuf as *mut c_void, "inbuf")?;
            // SAFETY: `inbuf` holds `insize >= end` bytes; the output is
            // valid as described (MPI contract).
            unsafe {
                let data =
                    std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos as usize), t.bytes());
                t.unpack(data);
            }
        }
        // SAFETY: checked non-null.
        unsafe { put(position, end as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
    call_local("MPI_Get_address", || {
        args::out_ptr(MPI_COMM_WORLD, address, "address")?;
        // SAFETY: checked non-null.
        unsafe { put(address, location as MPI_Aint) };
        Ok(())
    })
}

/// Deprecated MPI-1 form.
#[no_mangle]
pub unsafe extern "C" fn MPI_Address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: forwarded MPI contract.
    unsafe { MPI_Get_address(location, address) }
}

#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(disp)
}

#[no_mangle]
pub extern "C" fn MPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    addr1.wrapping_sub(addr2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_layouts_agree_with_the_abi_sizes() {
        for h in 0..PREDEF_LIMIT {
            match (predefined_prim(h), predefined_datatype_size(h)) {
                (Some(p), Some(size)) => {
                    assert_eq!(Layout::prim(p).extent as usize, size, "extent of {h:#x}")
                }
                (None, None) => {}
                (p, s) => panic!("{h:#x}: prim {p:?} but ABI size {s:?}"),
            }
        }
    }
}
