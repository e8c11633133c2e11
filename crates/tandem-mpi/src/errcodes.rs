//! Error classes and codes the application adds (`MPI_Add_error_class`,
//! `MPI_Add_error_code`, `MPI_Add_error_string` and their `Remove`
//! counterparts), beside the predefined ones, which are their own classes.
//!
//! `MPI_Error_string` and `MPI_Error_class` may be called at any time, also
//! before `MPI_Init` and from an error handler the library runs, so the
//! registry is process-wide behind its own lock rather than in the state.

use std::collections::{BTreeMap, BTreeSet};
use std::os::raw::c_int;
use std::sync::Mutex;

use crate::abi::*;

/// One added class or code.
struct Added {
    /// Its class: itself for a class.
    class: c_int,
    string: Option<String>,
}

#[derive(Default)]
struct Registry {
    added: BTreeMap<c_int, Added>,
    /// Values removed, given out again before new ones.
    free: BTreeSet<c_int>,
    /// The next value never given out.
    next: c_int,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Runs `f` on the registry (a poisoned lock still holds a consistent
/// registry: no operation panics half way).
fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut guard = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let r = guard.get_or_insert_with(|| Registry {
        next: MPI_ERR_LASTCODE + 1,
        ..Registry::default()
    });
    f(r)
}

/// Whether `class` is a predefined error class one can add codes to.
fn predefined_class(class: c_int) -> bool {
    class != MPI_SUCCESS && error_class_description(class).is_some()
}

impl Registry {
    fn allocate(&mut self, class: Option<c_int>) -> Result<c_int, &'static str> {
        let value = match self.free.pop_first() {
            Some(v) => v,
            None => {
                let v = self.next;
                self.next = v.checked_add(1).ok_or("no error codes left")?;
                v
            }
        };
        self.added.insert(
            value,
            Added {
                class: class.unwrap_or(value),
                string: None,
            },
        );
        crate::attr::set_last_used_code(self.last_used());
        Ok(value)
    }

    fn remove(&mut self, value: c_int) {
        self.added.remove(&value);
        self.free.insert(value);
        crate::attr::set_last_used_code(self.last_used());
    }

    /// The largest value in use (`MPI_LASTUSEDCODE`).
    fn last_used(&self) -> c_int {
        self.added
            .last_key_value()
            .map_or(MPI_ERR_LASTCODE, |(&k, _)| k)
    }

    fn is_class(&self, value: c_int) -> bool {
        self.added.get(&value).is_some_and(|a| a.class == value)
    }
}

/// `MPI_Add_error_class`: a new class.
pub fn add_class() -> Result<c_int, &'static str> {
    with(|r| r.allocate(None))
}

/// `MPI_Add_error_code`: a new code of `class` (predefined or added).
pub fn add_code(class: c_int) -> Result<c_int, String> {
    with(|r| {
        if !predefined_class(class) && !r.is_class(class) {
            return Err(format!("{class} is not an error class"));
        }
        r.allocate(Some(class)).map_err(String::from)
    })
}

/// `MPI_Add_error_string`: sets (or replaces) the string of an added class
/// or code.
pub fn set_string(code: c_int, text: String) -> Result<(), String> {
    with(|r| match r.added.get_mut(&code) {
        Some(a) => {
            a.string = Some(text);
            Ok(())
        }
        None => Err(format!(
            "{code} is not an error class or code added by the application"
        )),
    })
}

/// `MPI_Remove_error_string`.
pub fn remove_string(code: c_int) -> Result<(), String> {
    with(|r| match r.added.get_mut(&code) {
        Some(a) if a.string.is_some() => {
            a.string = None;
            Ok(())
        }
        Some(_) => Err(format!("error code {code} has no string")),
        None => Err(format!(
            "{code} is not an error class or code added by the application"
        )),
    })
}

/// `MPI_Remove_error_code`: an added code (not a class) whose string, if
/// it had one, was removed first (MPI-4.1: removing it before is
/// erroneous).
pub fn remove_code(code: c_int) -> Result<(), String> {
    with(|r| match r.added.get(&code) {
        Some(a) if a.class != code && a.string.is_some() => Err(format!(
            "error code {code} still has its string (MPI_Remove_error_string first)"
        )),
        Some(a) if a.class != code => {
            r.remove(code);
            Ok(())
        }
        _ => Err(format!(
            "{code} is not an error code added by the application"
        )),
    })
}

/// `MPI_Remove_error_class`: an added class with no codes left.
pub fn remove_class(class: c_int) -> Result<(), String> {
    with(|r| {
        if !r.is_class(class) {
            return Err(format!(
                "{class} is not an error class added by the application"
            ));
        }
        if r.added.iter().any(|(&k, a)| a.class == class && k != class) {
            return Err(format!("error class {class} still has codes"));
        }
        if r.added.get(&class).is_some_and(|a| a.string.is_some()) {
            return Err(format!(
                "error class {class} still has its string (MPI_Remove_error_string first)"
            ));
        }
        r.remove(class);
        Ok(())
    })
}

/// The class of an error code, predefined or added; `None` if unknown.
pub fn class_of(code: c_int) -> Option<c_int> {
    if error_class_description(code).is_some() {
        return Some(code);
    }
    with(|r| r.added.get(&code).map(|a| a.class))
}

/// An error the application reported through a callback's return value
/// `rc` (not `MPI_SUCCESS`): the failing call returns `rc` when it is an
/// error MPI knows (a class, or a code the application added), else
/// `MPI_ERR_OTHER`.
pub fn from_callback(rc: c_int, message: String) -> tandem::Error {
    let mut error = tandem::Error::new(tandem::ErrorClass::Other, message);
    if rc != MPI_SUCCESS && class_of(rc).is_some() {
        error.code = Some(rc);
    }
    error
}

/// The string `MPI_Error_string` gives for an added class or code (empty
/// when none was set, as the standard says); `None` if `code` is not one.
pub fn added_string(code: c_int) -> Option<String> {
    with(|r| {
        r.added
            .get(&code)
            .map(|a| a.string.clone().unwrap_or_default())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: the registry is process-wide.
    #[test]
    fn classes_codes_and_strings() {
        let class = add_class().unwrap();
        assert!(class > MPI_ERR_LASTCODE);
        assert_eq!(class_of(class), Some(class));
        assert_eq!(added_string(class).as_deref(), Some(""));
        let code = add_code(class).unwrap();
        assert_ne!(code, class);
        assert_eq!(class_of(code), Some(class));
        let arg_code = add_code(MPI_ERR_ARG).unwrap();
        assert_eq!(class_of(arg_code), Some(MPI_ERR_ARG));
        assert!(add_code(MPI_SUCCESS).is_err());
        assert!(add_code(code).is_err(), "a code is not a class");
        assert!(add_code(-5).is_err());

        set_string(code, "mine".into()).unwrap();
        assert_eq!(added_string(code).as_deref(), Some("mine"));
        assert!(set_string(MPI_ERR_ARG, "no".into()).is_err());
        remove_string(code).unwrap();
        assert!(remove_string(code).is_err());

        assert!(remove_class(class).is_err(), "it still has a code");
        assert!(remove_code(class).is_err(), "a class is not a code");
        remove_code(code).unwrap();
        remove_class(class).unwrap();
        assert_eq!(class_of(code), None);
        assert_eq!(class_of(class), None);
        remove_code(arg_code).unwrap();

        // Removed values are given out again.
        let again = add_class().unwrap();
        assert!(again == class || again == code || again == arg_code);
        remove_class(again).unwrap();
    }
}
