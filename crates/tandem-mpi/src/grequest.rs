//! Generalized requests (`MPI_Grequest_start`, `MPI_Grequest_complete`):
//! operations the application runs itself and completes, waited for and
//! tested like any other request. Their query, free and cancel callbacks
//! run inside the library (in the wait, test or cancel that calls them),
//! so of the MPI calls they may make only those that need no library state
//! work there: `MPI_Status_set_elements`, `_set_elements_x` and
//! `_set_cancelled`, which is what query callbacks call, and the datatype
//! queries (state.rs, `call_local`); any other ends the job with a message
//! naming it.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};

use tandem::p2p::Status;
use tandem::{Error, ErrorClass};

use crate::abi::*;
use crate::args::{self, put, status_bytes};
use crate::request::{self, Op};
use crate::state::{call, Fail};

/// A generalized request in flight.
pub struct Greq {
    query: MPI_Grequest_query_function,
    free: MPI_Grequest_free_function,
    cancel: MPI_Grequest_cancel_function,
    extra: *mut c_void,
    /// `MPI_Grequest_complete` was called.
    pub complete: bool,
}

impl Greq {
    /// The status the query callback gives.
    pub fn query(&self) -> Status {
        let mut st = MPI_Status {
            MPI_SOURCE: MPI_UNDEFINED,
            MPI_TAG: MPI_UNDEFINED,
            MPI_ERROR: MPI_SUCCESS,
            internal: [0; 5],
        };
        // SAFETY: the application's query callback, with its extra state
        // and a status it may write (MPI_Grequest_query_function).
        let rc = unsafe { (self.query)(self.extra, &mut st) };
        Status {
            // Any value the callback set, MPI_ANY_SOURCE included, comes
            // back as it was (the cast is undone when the status is written).
            source: (st.MPI_SOURCE != MPI_UNDEFINED).then_some(st.MPI_SOURCE as u32),
            tag: (st.MPI_TAG != MPI_UNDEFINED).then_some(st.MPI_TAG),
            count: status_bytes(&st) as usize,
            cancelled: st.internal[2] != 0,
            error: failed("query", rc),
        }
    }

    /// The final status, then the free callback.
    pub fn finish(&self) -> Status {
        let mut st = self.query();
        // SAFETY: the application's free callback with its extra state.
        let rc = unsafe { (self.free)(self.extra) };
        if st.error.is_none() {
            st.error = failed("free", rc);
        }
        st
    }

    /// The cancel callback; its error is `MPI_Cancel`'s.
    pub fn cancel(&self) -> Option<Error> {
        // SAFETY: the application's cancel callback with its extra state.
        let rc = unsafe { (self.cancel)(self.extra, c_int::from(self.complete)) };
        failed("cancel", rc)
    }
}

fn failed(which: &str, rc: c_int) -> Option<Error> {
    (rc != MPI_SUCCESS).then(|| {
        crate::errcodes::from_callback(
            rc,
            format!("the generalized request's {which} callback returned {rc}"),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Grequest_start(
    query_fn: Option<MPI_Grequest_query_function>,
    free_fn: Option<MPI_Grequest_free_function>,
    cancel_fn: Option<MPI_Grequest_cancel_function>,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Grequest_start", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        let (Some(query), Some(free), Some(cancel)) = (query_fn, free_fn, cancel_fn) else {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "a generalized request needs query, free and cancel callbacks",
            ));
        };
        let g = Greq {
            query,
            free,
            cancel,
            extra: extra_state,
            complete: false,
        };
        let h = request::handle(s, MPI_COMM_WORLD, Op::Greq(Box::new(g)));
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Grequest_complete(request: MPI_Request) -> c_int {
    call("MPI_Grequest_complete", |s| {
        let g = s.ext.reqs.greq_mut(request).ok_or_else(|| {
            Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Request,
                format!("{request:#x} is not a generalized request in flight"),
            )
        })?;
        g.complete = true;
        Ok(())
    })
}
