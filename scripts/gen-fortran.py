#!/usr/bin/env python3
"""Generates Tandem's Fortran bindings from include/mpi.h.

One description (the C prototypes and constants of include/mpi.h, which
follows the MPI-5.0 standard ABI) gives:

  crates/tandem-mpi/src/fortran_generated.rs
      the entry points gfortran calls (`mpi_send_`, `pmpi_send_`): every
      argument by reference, handles as INTEGERs, CHARACTER lengths passed
      after the arguments, the error code in the last argument;
  include/mpif.h                      constants and function types;
  include/fortran/mpi.f90             `use mpi`: the same, with interfaces;
  include/fortran/mpi_f08.f90         `use mpi_f08`: handle types, optional
                                      ierror, status as a type.

The modules hold no code (only constants and interfaces), so `tandem fc`
compiles them into .mod files for whichever gfortran the user has; the
routines are all in libmpi_abi.

    scripts/gen-fortran.py          rewrite the files
    scripts/gen-fortran.py --check  fail if a file is not current (CI)
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "mpi.h"
RUST_SRC = ROOT / "crates" / "tandem-mpi" / "src"
OUT_RUST = RUST_SRC / "fortran_generated.rs"
OUT_MPIF = ROOT / "include" / "mpif.h"
OUT_MOD = ROOT / "include" / "fortran" / "mpi.f90"
OUT_F08 = ROOT / "include" / "fortran" / "mpi_f08.f90"

HANDLE_KIND = {
    "MPI_Comm": "Comm",
    "MPI_Datatype": "Type",
    "MPI_Group": "Group",
    "MPI_Info": "Info",
    "MPI_Win": "Win",
    "MPI_File": "File",
    "MPI_Op": "Op",
    "MPI_Errhandler": "Errhandler",
    "MPI_Request": "Request",
    "MPI_Message": "Message",
    "MPI_Session": "Session",
}
NULL_HANDLE = {
    "MPI_Comm": "MPI_COMM_NULL",
    "MPI_Datatype": "MPI_DATATYPE_NULL",
    "MPI_Group": "MPI_GROUP_NULL",
    "MPI_Info": "MPI_INFO_NULL",
    "MPI_Win": "MPI_WIN_NULL",
    "MPI_File": "MPI_FILE_NULL",
    "MPI_Op": "MPI_OP_NULL",
    "MPI_Errhandler": "MPI_ERRHANDLER_NULL",
    "MPI_Request": "MPI_REQUEST_NULL",
    "MPI_Message": "MPI_MESSAGE_NULL",
    "MPI_Session": "MPI_SESSION_NULL",
}
INT_KIND = {
    "MPI_Aint": ("MPI_Aint", "integer(kind=MPI_ADDRESS_KIND)"),
    "MPI_Count": ("MPI_Count", "integer(kind=MPI_COUNT_KIND)"),
    "MPI_Offset": ("MPI_Offset", "integer(kind=MPI_OFFSET_KIND)"),
    "int": ("c_int", "integer"),
}

# Arguments that are LOGICAL in Fortran (C int 0/1; gfortran's .true. is 1).
LOGICAL_NAMES = {"flag", "reorder", "periods", "remain_dims", "weighted",
                 "high", "commute"}

# Pointer-to-handle arguments that the function reads as well as writes.
INOUT_HANDLE_FUNCS = re.compile(
    r"_free$|^MPI_Wait$|^MPI_Test$|^MPI_Start$|^MPI_Type_commit$|"
    r"^MPI_Comm_disconnect$|^MPI_File_close$|^MPI_Session_finalize$|"
    r"^MPI_Mrecv$|^MPI_Imrecv$|^MPI_Request_free$|^MPI_Grequest_complete$|"
    r"^MPI_Cancel$|^MPI_Pready|^MPI_Parrived$|^MPI_Request_get_status$|"
    r"^MPI_Win_free$|^MPI_Group_free$|^MPI_Info_free$")

# Written by hand in crates/tandem-mpi/src/fortran.rs, or not given a
# Fortran binding by the standard (MPI_T, language interoperability).
HAND_WRITTEN = {
    "MPI_Init", "MPI_Init_thread", "MPI_Wtime", "MPI_Wtick", "MPI_Aint_add",
    "MPI_Aint_diff", "MPI_Pcontrol", "MPI_Comm_get_attr", "MPI_Op_create",
    "MPI_Type_get_attr", "MPI_Win_get_attr", "MPI_Comm_set_attr",
    "MPI_Type_set_attr", "MPI_Win_set_attr", "MPI_Attr_get", "MPI_Attr_put",
    "MPI_Info_get_string", "MPI_Info_get", "MPI_Comm_create_keyval",
    "MPI_Type_create_keyval", "MPI_Win_create_keyval", "MPI_Keyval_create",
    "MPI_Comm_create_errhandler", "MPI_Win_create_errhandler", "MPI_File_create_errhandler",
    "MPI_Comm_spawn", "MPI_Comm_spawn_multiple",
}

# Routines taking info keys and values, whose leading and trailing blanks
# are not significant in Fortran (the standard's chapter on info objects).
INFO_STRING_FUNCS = {"MPI_Info_set", "MPI_Info_delete", "MPI_Info_get_valuelen"}

# MPI_SIZEOF's specific procedures, one per intrinsic type and kind:
# (Fortran type, name tag, size in bytes of one element). They are
# external routines in libmpi_abi (the modules hold no code); the variable
# is an assumed-rank dummy, so scalars and arrays of any rank match.
SIZEOF_TYPES = (
    [(f"integer(kind={k})", f"integer{k}", k) for k in (1, 2, 4, 8, 16)]
    + [(f"real(kind={k})", f"real{k}", k) for k in (4, 8, 16)]
    + [(f"complex(kind={k})", f"complex{k}", 2 * k) for k in (4, 8, 16)]
    + [(f"logical(kind={k})", f"logical{k}", k) for k in (1, 2, 4, 8)]
    + [("character(len=*)", "character", 1)]
)

# Predefined attribute callbacks: Fortran procedures in libmpi_abi.
PREDEFINED_CALLBACKS = [
    "MPI_COMM_NULL_COPY_FN", "MPI_COMM_DUP_FN", "MPI_COMM_NULL_DELETE_FN",
    "MPI_TYPE_NULL_COPY_FN", "MPI_TYPE_DUP_FN", "MPI_TYPE_NULL_DELETE_FN",
    "MPI_WIN_NULL_COPY_FN", "MPI_WIN_DUP_FN", "MPI_WIN_NULL_DELETE_FN",
    "MPI_NULL_COPY_FN", "MPI_DUP_FN", "MPI_NULL_DELETE_FN",
]
NO_FORTRAN = re.compile(
    r"^MPI_T_|_c2f$|_f2c$|_toint$|_fromint$|^MPI_Status_[cf]2f|"
    r"^MPI_Status_f082|^MPI_Status_f2f08|^MPI_Status_c2f08|_f2c08|"
    r"^MPI_Info_create_env$|^MPI_Register_datarep|"
    r"^MPI_Abi_|^MPI_Session_get_pset_info$")


class Param:
    def __init__(self, ctype, name, array):
        self.ctype = ctype          # e.g. "const int", "MPI_Comm *", "void *"
        self.name = name
        self.array = array          # declared with []

    @property
    def base(self):
        return self.ctype.replace("const ", "").replace("*", "").strip()

    @property
    def pointer(self):
        return self.ctype.count("*") + (1 if self.array else 0)

    @property
    def const(self):
        return self.ctype.startswith("const ")


class Func:
    def __init__(self, ret, name, params):
        self.ret = ret
        self.name = name
        self.params = params


def parse_header(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    funcs = []
    for m in re.finditer(r"^(int|double|MPI_Aint)\s+(MPI_\w+)\s*\(([^;]*?)\)\s*;",
                         text, flags=re.M):
        ret, name, args = m.group(1), m.group(2), " ".join(m.group(3).split())
        params = []
        bad = False
        if args.strip() not in ("", "void"):
            for a in args.split(","):
                a = a.strip()
                if a == "...":
                    bad = True
                    break
                am = re.match(r"^(.*?)(\w+)\s*((?:\[\w*\])*)$", a)
                if not am:
                    bad = True
                    break
                ctype, pname, arr = am.group(1).strip(), am.group(2), am.group(3)
                params.append(Param(ctype, pname, arr.count("[")))
        funcs.append((Func(ret, name, params), bad))
    return funcs


def parse_constants(text):
    """(name, kind, value): kind is 'int' or a handle type."""
    out = []
    clean = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for m in re.finditer(r"^#define\s+(MPI_\w+|MPIX_\w+)\s+\(\((MPI_\w+)\)(0x[0-9a-f]+)\)",
                         clean, flags=re.M):
        out.append((m.group(1), m.group(2), int(m.group(3), 16)))
    # Integers of a C type wider than int, e.g. MPI_DISPLACEMENT_CURRENT.
    for m in re.finditer(r"^#define\s+(MPI_\w+)\s+\(\((MPI_Offset|MPI_Aint|MPI_Count)\)(-?\d+)\)",
                         clean, flags=re.M):
        out.append((m.group(1), m.group(2), int(m.group(3))))
    byname = {n: (k, v) for n, k, v in out}
    for m in re.finditer(r"^#define\s+(MPI_\w+)\s+(MPI_\w+)\s*$", clean, flags=re.M):
        if m.group(2) in byname:
            k, v = byname[m.group(2)]
            out.append((m.group(1), k, v))
    for m in re.finditer(r"^#define\s+(MPI_\w+)\s+(-?\d+)\s*$", clean, flags=re.M):
        out.append((m.group(1), "int", int(m.group(2))))
    for m in re.finditer(r"\benum\b[^{]*\{(.*?)\}", clean, flags=re.S):
        for em in re.finditer(r"(MPI_\w+|MPIX_\w+)\s*=\s*(-?\d+)", m.group(1)):
            out.append((em.group(1), "int", int(em.group(2))))
    seen = set()
    result = []
    for n, k, v in out:
        if n in seen:
            continue
        seen.add(n)
        result.append((n, k, v))
    return result


# --------------------------------------------------------------------------
# Classification of arguments
# --------------------------------------------------------------------------

def classify(func, p):
    """The role of a C argument in the Fortran binding."""
    b = p.base
    if p.ctype in ("const void *", "void *"):
        if p.name in ("baseptr", "buffer_addr"):
            return "raw"            # the address is written into an INTEGER
        return "choice"
    if "function" in p.ctype or b.endswith("_fn"):
        return None
    if b in HANDLE_KIND:
        if p.pointer == 0:
            return "handle_in"
        if p.array:
            return "handle_array"
        return "handle_ptr"
    if b == "MPI_Status":
        return "statuses" if p.array or "statuses" in p.name else "status"
    if b == "char":
        if p.pointer == 1:
            return "str_in" if p.const else "str_out"
        return None
    if b in INT_KIND:
        if p.pointer == 0:
            return "int_in"
        if p.pointer == 1:
            if b == "int" and p.array == 2:
                return "raw"        # ranges[][3]
            return "int_ptr"
        return None
    return None


def fname(func):
    return func.name.lower() + "_"


def array_len(func, p):
    """A Rust expression for the length of handle array p."""
    names = [q.name for q in func.params]
    if "alltoallw" in func.name.lower():
        neighbor = "neighbor" in func.name.lower()
        send = p.name.startswith("send")
        return (f"alltoallw_types(handle_int::MPI_Comm_fromint(*comm), "
                f"{str(neighbor).lower()}, {str(send).lower()})")
    for cand in ("count", "incount", "max_datatypes"):
        if cand in names:
            return f"*{cand}"
    return None


# --------------------------------------------------------------------------
# Rust
# --------------------------------------------------------------------------

def rust_int_type(b):
    return INT_KIND[b][0]


def rust_wrapper(func):
    decl = []
    pre = []
    args = []
    post = []
    hidden = []
    for p in func.params:
        role = classify(func, p)
        b = p.base
        n = p.name
        if role == "choice":
            decl.append(f"{n}: *mut c_void")
            args.append(f"fix_choice({n})")
        elif role == "raw":
            decl.append(f"{n}: *mut c_void")
            args.append(f"{n}.cast()")
        elif role == "int_in":
            t = rust_int_type(b)
            decl.append(f"{n}: *const {t}")
            args.append(f"*{n}")
        elif role == "int_ptr":
            t = rust_int_type(b)
            if p.const:
                decl.append(f"{n}: *const {t}")
                if "weights" in n:
                    args.append(f"fix_weights({n}.cast_mut()).cast_const()")
                else:
                    args.append(n)
            else:
                decl.append(f"{n}: *mut {t}")
                args.append(f"fix_weights({n})" if "weights" in n else n)
        elif role == "handle_in":
            k = HANDLE_KIND[b]
            decl.append(f"{n}: *const c_int")
            args.append(f"handle_int::MPI_{k}_fromint(*{n})")
        elif role == "handle_ptr":
            k = HANDLE_KIND[b]
            decl.append(f"{n}: *mut c_int")
            if INOUT_HANDLE_FUNCS.search(func.name):
                pre.append(f"let mut h_{n} = handle_int::MPI_{k}_fromint(*{n});")
            else:
                pre.append(f"let mut h_{n}: {b} = {NULL_HANDLE[b]};")
            args.append(f"&mut h_{n}")
            post.append(f"*{n} = handle_int::MPI_{k}_toint(h_{n});")
        elif role == "handle_array":
            k = HANDLE_KIND[b]
            ln = array_len(func, p)
            assert ln, func.name
            decl.append(f"{n}: *mut c_int")
            mut = "" if p.const else "mut "
            pre.append(f"let {mut}h_{n}: Vec<{b}> = handles_in({n}, {ln}, handle_int::MPI_{k}_fromint);")
            args.append(f"h_{n}.as_mut_ptr()" if not p.const else f"h_{n}.as_ptr()")
            if not p.const:
                post.append(f"handles_out(&h_{n}, {n}, handle_int::MPI_{k}_toint);")
        elif role == "status":
            if p.const:
                decl.append(f"{n}: *const MPI_Status")
                args.append(n)
            else:
                decl.append(f"{n}: *mut MPI_Status")
                args.append(f"fix_status({n})")
        elif role == "statuses":
            decl.append(f"{n}: *mut MPI_Status")
            args.append(f"fix_status({n})")
        elif role == "str_in":
            decl.append(f"{n}: *const c_char")
            hidden.append(f"{n}_len: usize")
            conv = "info_str_in" if func.name in INFO_STRING_FUNCS else "str_in"
            pre.append(f"let s_{n} = {conv}({n}, {n}_len);")
            args.append(f"s_{n}.as_ptr()")
        elif role == "str_out":
            decl.append(f"{n}: *mut c_char")
            hidden.append(f"{n}_len: usize")
            pre.append(f"let mut s_{n} = vec![0 as c_char; {n}_len.max(STR_OUT_MIN) + 1];")
            args.append(f"s_{n}.as_mut_ptr()")
            post.append(f"str_out(&s_{n}, {n}, {n}_len);")
        else:
            raise ValueError(f"{func.name}: {p.ctype} {p.name}")
    decl.append("ierror: *mut c_int")
    decl.extend(hidden)
    # 1-based indices in Fortran.
    if func.name in ("MPI_Waitany", "MPI_Testany", "MPI_Request_get_status_any"):
        idx = [p.name for p in func.params if p.name in ("indx", "index")][0]
        post.append(f"if rc == MPI_SUCCESS && *{idx} >= 0 {{ *{idx} += 1; }}")
    if func.name in ("MPI_Waitsome", "MPI_Testsome", "MPI_Request_get_status_some"):
        post.append("if rc == MPI_SUCCESS { indices_to_fortran(array_of_indices, *outcount); }")
    call = f"c::{func.name}({', '.join(args)})"
    body = []
    body.extend(pre)
    body.append(f"let rc = {call};")
    body.extend(post)
    body.append("set_ierror(ierror, rc);")
    lines = []
    sig = ", ".join(decl)
    lines.append(f"/// `{func.name.upper()}`.")
    lines.append("#[no_mangle]")
    lines.append(f"pub unsafe extern \"C\" fn {fname(func)}({sig}) {{")
    lines.append("    // SAFETY: gfortran passes every argument by reference, valid for")
    lines.append("    // the call; the C function checks what the program gave.")
    lines.append("    unsafe {")
    for line in body:
        lines.append("        " + line)
    lines.append("    }")
    lines.append("}")
    lines.append("#[no_mangle]")
    names = [d.split(":")[0] for d in decl]
    lines.append(f"pub unsafe extern \"C\" fn p{fname(func)}({sig}) {{")
    lines.append("    // SAFETY: the same contract as the function it forwards to.")
    lines.append(f"    unsafe {{ {fname(func)}({', '.join(names)}) }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Fortran
# --------------------------------------------------------------------------

FORTRAN_MAX_STRINGS = {
    "MPI_MAX_DATAREP_STRING", "MPI_MAX_ERROR_STRING", "MPI_MAX_INFO_KEY",
    "MPI_MAX_INFO_VAL", "MPI_MAX_LIBRARY_VERSION_STRING", "MPI_MAX_OBJECT_NAME",
    "MPI_MAX_PORT_NAME", "MPI_MAX_PROCESSOR_NAME", "MPI_MAX_STRINGTAG_LEN",
    "MPI_MAX_PSET_NAME_LEN",
}

# Constants that only make sense in C.
C_ONLY_CONST = re.compile(r"^MPI_F_|^MPI_T_|^MPI_VERSION$|^MPI_SUBVERSION$|^MPI_ABI_")

FORTRAN_EXTRA_INT = [
    ("MPI_ADDRESS_KIND", 8),
    ("MPI_OFFSET_KIND", 8),
    ("MPI_COUNT_KIND", 8),
    ("MPI_INTEGER_KIND", 4),
    ("MPI_STATUS_SIZE", 8),
    ("MPI_SOURCE", 1),
    ("MPI_TAG", 2),
    ("MPI_ERROR", 3),
    ("MPI_VERSION", 5),
    ("MPI_SUBVERSION", 0),
]

SENTINELS = [
    # (Fortran name, symbol, declaration in mpif.h / the mpi module)
    ("MPI_STATUS_IGNORE", "tandem_status_ignore", "integer MPI_STATUS_IGNORE(MPI_STATUS_SIZE)"),
    ("MPI_STATUSES_IGNORE", "tandem_statuses_ignore", "integer MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)"),
    ("MPI_BOTTOM", "tandem_bottom", "integer MPI_BOTTOM"),
    ("MPI_IN_PLACE", "tandem_in_place", "integer MPI_IN_PLACE"),
    ("MPI_ERRCODES_IGNORE", "tandem_errcodes_ignore", "integer MPI_ERRCODES_IGNORE(1)"),
    ("MPI_UNWEIGHTED", "tandem_unweighted", "integer MPI_UNWEIGHTED(1)"),
    ("MPI_WEIGHTS_EMPTY", "tandem_weights_empty", "integer MPI_WEIGHTS_EMPTY(1)"),
    ("MPI_ARGV_NULL", "tandem_argv_null", "character*1 MPI_ARGV_NULL(1)"),
    ("MPI_ARGVS_NULL", "tandem_argvs_null", "character*1 MPI_ARGVS_NULL(1,1)"),
]


def fortran_constants(consts):
    """(name, value) for every integer constant, handles as integers."""
    out = []
    names = set()
    for n, v in FORTRAN_EXTRA_INT:
        out.append((n, v))
        names.add(n)
    for n, k, v in consts:
        if n in names or C_ONLY_CONST.search(n):
            continue
        if k != "int" and k not in HANDLE_KIND:
            continue
        if n in FORTRAN_MAX_STRINGS:
            v -= 1
        if not -2**31 <= v < 2**31:
            continue
        names.add(n)
        out.append((n, v))
    return out


def typed_constants(consts):
    """(name, Fortran type, value) for the integer constants of a C type
    wider than int (MPI_Offset, MPI_Aint, MPI_Count)."""
    return [(n, INT_KIND[k][1], v) for n, k, v in consts
            if k in INT_KIND and k != "int" and not C_ONLY_CONST.search(n)]


def fixed_lines(stmt):
    """A statement in fixed and free form alike: it must fit in 72 columns."""
    line = "      " + stmt
    assert len(line) <= 72, line
    return line


def mpif_h(consts, funcs):
    lines = [
        "! mpif.h -- Tandem's Fortran 77 interface (fixed and free form).",
        "! Generated by scripts/gen-fortran.py from include/mpi.h; do not edit.",
        "!",
        "! Handles are INTEGERs (MPI-5.0 standard ABI values); a status is",
        "! INTEGER STATUS(MPI_STATUS_SIZE).",
    ]
    for n, v in fortran_constants(consts):
        lines.append(fixed_lines(f"integer {n}"))
        lines.append(fixed_lines(f"parameter ({n}={v})"))
    for n, t, v in typed_constants(consts):
        lines.append(fixed_lines(f"{t} {n}"))
        lines.append(fixed_lines(f"parameter ({n}={v})"))
    for fn, sym, decl in SENTINELS:
        lines.append(fixed_lines(decl))
        lines.append(fixed_lines(f"common /{sym}/ {fn}"))
        lines.append(fixed_lines(f"save /{sym}/"))
    for i in range(0, len(PREDEFINED_CALLBACKS), 2):
        lines.append(fixed_lines("external " + ", ".join(PREDEFINED_CALLBACKS[i:i + 2])))
    lines.append(fixed_lines("external MPI_WTIME, MPI_WTICK"))
    lines.append(fixed_lines("double precision MPI_WTIME, MPI_WTICK"))
    lines.append(fixed_lines("external PMPI_WTIME, PMPI_WTICK"))
    lines.append(fixed_lines("double precision PMPI_WTIME, PMPI_WTICK"))
    lines.append(fixed_lines("external MPI_AINT_ADD, MPI_AINT_DIFF"))
    lines.append(fixed_lines("integer(kind=MPI_ADDRESS_KIND) MPI_AINT_ADD"))
    lines.append(fixed_lines("integer(kind=MPI_ADDRESS_KIND) MPI_AINT_DIFF"))
    return "\n".join(lines) + "\n"


def f_arg_decl(func, p, f08):
    """The Fortran declaration of argument p, or None for no declaration."""
    role = classify(func, p)
    b = p.base
    n = p.name
    if role == "choice":
        return [f"!GCC$ ATTRIBUTES NO_ARG_CHECK :: {n}", f"type(*), dimension(*) :: {n}"]
    if role == "raw":
        if n == "ranges":
            return [f"integer :: {n}(3,*)"]
        return [f"integer(kind=MPI_ADDRESS_KIND) :: {n}"]
    if role in ("int_in", "int_ptr"):
        t = INT_KIND[b][1]
        if n in LOGICAL_NAMES and b == "int":
            t = "logical"
        dim = "(*)" if p.array or (role == "int_ptr" and is_array_name(func, p)) else ""
        return [f"{t} :: {n}{dim}"]
    if role in ("handle_in", "handle_ptr"):
        t = f"type({b})" if f08 else "integer"
        return [f"{t} :: {n}"]
    if role == "handle_array":
        t = f"type({b})" if f08 else "integer"
        return [f"{t} :: {n}(*)"]
    if role == "status":
        if f08:
            return [f"type(MPI_Status) :: {n}"]
        return [f"integer :: {n}(MPI_STATUS_SIZE)"]
    if role == "statuses":
        if f08:
            return [f"type(MPI_Status) :: {n}(*)"]
        return [f"integer :: {n}(MPI_STATUS_SIZE,*)"]
    if role in ("str_in", "str_out"):
        return [f"character(len=*) :: {n}"]
    raise ValueError(func.name)


ARRAY_NAMES = re.compile(r"^array_of|s$|^dims$|^coords$|^index$|^edges$|^ranks|"
                         r"counts|displs|weights|^sources$|^destinations$|"
                         r"^degrees$|^neighbors$|^ranges$|^indices$|errcodes")
SCALAR_S = {"status", "address", "flag", "newrank", "nnodes", "nedges",
            "ndims", "rank", "size", "count", "outcount", "incount", "indx",
            "errorcode", "errorclass", "resultlen", "position", "extent",
            "lb", "ub", "true_lb", "true_extent", "displacement", "disp",
            "offset", "keyval", "len", "provided", "nkeys", "valuelen",
            "buflen", "nneighbors", "indegree", "outdegree", "weighted",
            "maxindex", "maxedges", "maxneighbors", "maxdims", "nints",
            "naddresses", "ndatatypes", "combiner", "num_integers",
            "num_addresses", "num_datatypes", "num_large_counts", "class",
            "periods"}


def is_array_name(func, p):
    if p.name in ("periods", "remain_dims"):
        return True
    if p.name in SCALAR_S:
        return False
    return bool(ARRAY_NAMES.search(p.name))


def interface(func, f08, binding_name=None):
    names = [p.name for p in func.params]
    lines = [f"subroutine {func.name}({', '.join(names + ['ierror'])})"]
    lines.append("  import")
    lines.append("  implicit none")
    for p in func.params:
        for d in f_arg_decl(func, p, f08):
            lines.append("  " + d)
    if f08:
        lines.append("  integer, optional :: ierror")
    else:
        lines.append("  integer :: ierror")
    lines.append(f"end subroutine {func.name}")
    return lines


HANDLE_TYPES_F08 = list(HANDLE_KIND.keys())


def module_common(consts, f08):
    lines = []
    for n, v in fortran_constants(consts):
        kind = None
        for cn, k, _ in consts:
            if cn == n:
                kind = k
                break
        if f08 and kind in HANDLE_KIND:
            lines.append(f"  type({kind}), parameter :: {n} = {kind}({v})")
        else:
            lines.append(f"  integer, parameter :: {n} = {v}")
    for n, t, v in typed_constants(consts):
        lines.append(f"  {t}, parameter :: {n} = {v}")
    return lines


def mpi_f90(consts, funcs, f08):
    mod = "mpi_f08" if f08 else "mpi"
    lines = [
        f"! The `{mod}` module of Tandem. Generated by scripts/gen-fortran.py",
        "! from include/mpi.h; do not edit. It holds only constants, types and",
        "! interfaces: the routines are in libmpi_abi.",
        f"module {mod}",
        "  implicit none",
        "  private :: tandem_unused",
        "  logical, parameter :: MPI_SUBARRAYS_SUPPORTED = .false.",
        "  logical, parameter :: MPI_ASYNC_PROTECTS_NONBLOCKING = .false.",
        "  integer, parameter :: tandem_unused = 0",
    ]
    if f08:
        for t in HANDLE_TYPES_F08:
            lines += [f"  type, bind(C) :: {t}", "    integer :: MPI_VAL", f"  end type {t}"]
        lines += [
            "  type, bind(C) :: MPI_Status",
            "    integer :: MPI_SOURCE, MPI_TAG, MPI_ERROR",
            "    integer :: tandem_internal(5)",
            "  end type MPI_Status",
        ]
    lines += module_common(consts, f08)
    lines.append("  external :: " + ", ".join(PREDEFINED_CALLBACKS))
    for fn, sym, decl in SENTINELS:
        if f08 and fn == "MPI_STATUS_IGNORE":
            decl = "type(MPI_Status) :: MPI_STATUS_IGNORE"
        elif f08 and fn == "MPI_STATUSES_IGNORE":
            decl = "type(MPI_Status) :: MPI_STATUSES_IGNORE(1)"
        name = decl.split("::")[-1].strip() if "::" in decl else decl.split(" ", 1)[1]
        ftype = decl.split("::")[0].strip() if "::" in decl else decl.split(" ", 1)[0]
        ftype = ftype.replace("character*1", "character(len=1)")
        lines.append(f"  {ftype}, bind(C, name=\"{sym}_\") :: {name}")
    if f08:
        for t in HANDLE_TYPES_F08:
            k = HANDLE_KIND[t].lower()
            lines += [
                "  interface operator(==)",
                f"    logical function tandem_f08_{k}_eq(a, b)",
                "      import",
                f"      type({t}), intent(in) :: a, b",
                f"    end function tandem_f08_{k}_eq",
                "  end interface",
                "  interface operator(/=)",
                f"    logical function tandem_f08_{k}_ne(a, b)",
                "      import",
                f"      type({t}), intent(in) :: a, b",
                f"    end function tandem_f08_{k}_ne",
                "  end interface",
            ]
    lines.append("  interface")
    lines += [
        "    double precision function MPI_Wtime()",
        "    end function MPI_Wtime",
        "    double precision function MPI_Wtick()",
        "    end function MPI_Wtick",
        "    double precision function PMPI_Wtime()",
        "    end function PMPI_Wtime",
        "    double precision function PMPI_Wtick()",
        "    end function PMPI_Wtick",
        "    function MPI_Aint_add(base, disp)",
        "      import",
        "      integer(kind=MPI_ADDRESS_KIND) :: MPI_Aint_add, base, disp",
        "    end function MPI_Aint_add",
        "    function MPI_Aint_diff(addr1, addr2)",
        "      import",
        "      integer(kind=MPI_ADDRESS_KIND) :: MPI_Aint_diff, addr1, addr2",
        "    end function MPI_Aint_diff",
    ]
    for func in funcs:
        for line in interface(func, f08):
            lines.append("    " + line)
    for line in hand_interfaces(f08):
        lines.append("    " + line)
    lines.append("  end interface")
    lines.append("  interface MPI_Sizeof")
    for ftype, tag, _ in SIZEOF_TYPES:
        lines += [
            f"    subroutine tandem_sizeof_{tag}(x, size, ierror)",
            f"      {ftype}, dimension(..) :: x",
            "      integer :: size",
            "      integer, optional :: ierror" if f08 else "      integer :: ierror",
            f"    end subroutine tandem_sizeof_{tag}",
        ]
    lines.append("  end interface MPI_Sizeof")
    lines.append(f"end module {mod}")
    return "\n".join(w for line in lines for w in wrap_free(line)) + "\n"


def wrap_free(line, width=100):
    """Splits a free-form line after commas, with '&' continuations."""
    if len(line) <= width or line.lstrip().startswith("!"):
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    out = []
    cur = line
    while len(cur) > width:
        cut = cur.rfind(", ", 0, width - 2)
        if cut <= len(indent):
            break
        out.append(cur[:cut + 1] + " &")
        cur = indent + cur[cut + 2:]
    out.append(cur)
    return out


def hand_interfaces(f08):
    """Interfaces of the routines written by hand in fortran.rs."""
    opt = "integer, optional :: ierror" if f08 else "integer :: ierror"
    comm = "type(MPI_Comm)" if f08 else "integer"
    dtype = "type(MPI_Datatype)" if f08 else "integer"
    win = "type(MPI_Win)" if f08 else "integer"
    op = "type(MPI_Op)" if f08 else "integer"
    info = "type(MPI_Info)" if f08 else "integer"
    req = "type(MPI_Request)" if f08 else "integer"
    aint = "integer(kind=MPI_ADDRESS_KIND)"
    out = []

    def sub(name, args, decls):
        out.append(f"subroutine {name}({', '.join(args)})")
        out.append("  import")
        out.append("  implicit none")
        out.extend("  " + d for d in decls)
        out.append(f"end subroutine {name}")

    sub("MPI_Init", ["ierror"], [opt])
    sub("MPI_Init_thread", ["required", "provided", "ierror"], ["integer :: required, provided", opt])
    sub("MPI_Pcontrol", ["level"], ["integer :: level"])
    for kind, h in (("Comm", comm), ("Type", dtype), ("Win", win)):
        sub(f"MPI_{kind}_get_attr", ["obj", "keyval", "attribute_val", "flag", "ierror"],
            [f"{h} :: obj", "integer :: keyval", f"{aint} :: attribute_val", "logical :: flag", opt])
        sub(f"MPI_{kind}_set_attr", ["obj", "keyval", "attribute_val", "ierror"],
            [f"{h} :: obj", "integer :: keyval", f"{aint} :: attribute_val", opt])
    sub("MPI_Op_create", ["user_fn", "commute", "op", "ierror"],
        ["external :: user_fn", "logical :: commute", f"{op} :: op", opt])
    sub("MPI_Comm_spawn", ["command", "argv", "maxprocs", "info", "root", "comm", "intercomm",
                           "array_of_errcodes", "ierror"],
        ["character(len=*) :: command, argv(*)", f"{info} :: info", "integer :: maxprocs, root",
         f"{comm} :: comm, intercomm", "integer :: array_of_errcodes(*)", opt])
    sub("MPI_Comm_spawn_multiple", ["count", "array_of_commands", "array_of_argv",
                                    "array_of_maxprocs", "array_of_info", "root", "comm",
                                    "intercomm", "array_of_errcodes", "ierror"],
        ["integer :: count, root", "character(len=*) :: array_of_commands(*)",
         "character(len=*) :: array_of_argv(count, *)", "integer :: array_of_maxprocs(*)",
         f"{info} :: array_of_info(*)", f"{comm} :: comm, intercomm",
         "integer :: array_of_errcodes(*)", opt])
    sub("MPI_Info_get", ["info", "key", "valuelen", "value", "flag", "ierror"],
        [f"{info} :: info", "character(len=*) :: key, value", "integer :: valuelen",
         "logical :: flag", opt])
    sub("MPI_Info_get_string", ["info", "key", "buflen", "value", "flag", "ierror"],
        [f"{info} :: info", "character(len=*) :: key, value", "integer :: buflen",
         "logical :: flag", opt])
    for kind, h in (("Comm", comm), ("Type", dtype), ("Win", win)):
        sub(f"MPI_{kind}_create_keyval", ["copy_fn", "delete_fn", "keyval", "extra_state", "ierror"],
            ["external :: copy_fn, delete_fn", "integer :: keyval", f"{aint} :: extra_state", opt])
    eh = "type(MPI_Errhandler)" if f08 else "integer"
    for kind in ("Comm", "Win", "File"):
        sub(f"MPI_{kind}_create_errhandler", ["errhandler_fn", "errhandler", "ierror"],
            ["external :: errhandler_fn", f"{eh} :: errhandler", opt])
    if not f08:
        sub("MPI_Keyval_create", ["copy_fn", "delete_fn", "keyval", "extra_state", "ierror"],
            ["external :: copy_fn, delete_fn", "integer :: keyval, extra_state", opt])
        sub("MPI_Attr_get", ["comm", "keyval", "attribute_val", "flag", "ierror"],
            ["integer :: comm, keyval, attribute_val", "logical :: flag", opt])
        sub("MPI_Attr_put", ["comm", "keyval", "attribute_val", "ierror"],
            ["integer :: comm, keyval, attribute_val", opt])
    return out


def rust_extern(func):
    """The declaration of the C function, as the wrapper calls it."""
    decl = []
    for p in func.params:
        role = classify(func, p)
        b = p.base
        mut = "*const" if p.const else "*mut"
        if role in ("choice", "raw"):
            t = "*mut c_void"
        elif role == "int_in":
            t = rust_int_type(b)
        elif role == "int_ptr":
            t = f"{mut} {rust_int_type(b)}"
        elif role == "handle_in":
            t = b
        elif role in ("handle_ptr", "handle_array"):
            t = f"{mut} {b}"
        elif role in ("status", "statuses"):
            t = f"{mut} MPI_Status"
        elif role == "str_in":
            t = "*const c_char"
        elif role == "str_out":
            t = "*mut c_char"
        else:
            raise ValueError(func.name)
        decl.append(f"{p.name}: {t}")
    return f"        pub fn {func.name}({', '.join(decl)}) -> c_int;"


def rust_file(funcs):
    head = [
        "// Generated by scripts/gen-fortran.py from include/mpi.h; do not edit.",
        "// The Fortran entry points (see fortran.rs for the helpers they use).",
        "",
        "use std::os::raw::{c_char, c_int, c_void};",
        "",
        "use super::*;",
        "use crate::handle_int;",
        "",
    ]
    ext = ["/// The C functions, resolved within libmpi_abi.", "mod c {",
           "    use super::*;", "    extern \"C\" {"]
    ext += [rust_extern(f) for f in funcs]
    ext += ["    }", "}", ""]
    return ("\n".join(head + ext) + "\n".join(rust_wrapper(f) for f in funcs)
            + "\n".join(rust_sizeof(tag, size) for _, tag, size in SIZEOF_TYPES))


def rust_sizeof(tag, size):
    """The specific procedure of MPI_SIZEOF for one type and kind."""
    return f"""/// `MPI_SIZEOF` of a {tag} (bytes in an element: {size}).
#[no_mangle]
pub unsafe extern "C" fn tandem_sizeof_{tag}_(_x: *const c_void, size: *mut c_int, ierror: *mut c_int) {{
    // SAFETY: gfortran passes valid references (`ierror` is null when
    // mpi_f08's optional argument is absent).
    unsafe {{
        *size = {size};
        set_ierror(ierror, MPI_SUCCESS);
    }}
}}
"""


def main():
    check = "--check" in sys.argv[1:]
    text = HEADER.read_text()
    funcs = []
    skipped = []
    for func, bad in parse_header(text):
        if func.name.endswith("_c") or func.name in HAND_WRITTEN or NO_FORTRAN.search(func.name):
            continue
        if bad or func.ret != "int" or any(classify(func, p) is None for p in func.params):
            skipped.append(func.name)
            continue
        funcs.append(func)
    consts = parse_constants(text)
    rust = subprocess.run(["rustfmt", "--edition", "2021"], input=rust_file(funcs),
                          capture_output=True, text=True, check=True).stdout
    outputs = {
        OUT_RUST: rust,
        OUT_MPIF: mpif_h(consts, funcs),
        OUT_MOD: mpi_f90(consts, funcs, False),
        OUT_F08: mpi_f90(consts, funcs, True),
    }
    stale = []
    for path, content in outputs.items():
        old = path.read_text() if path.exists() else None
        if old != content:
            stale.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
    if check:
        if stale:
            for p in stale:
                print(f"gen-fortran: {p.relative_to(ROOT)} is not current; run scripts/gen-fortran.py",
                      file=sys.stderr)
            sys.exit(1)
        return
    print(f"gen-fortran: {len(funcs)} routines; without a Fortran binding: {' '.join(sorted(skipped))}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
