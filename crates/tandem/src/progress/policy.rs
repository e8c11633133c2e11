//! The progress policy (the `progress` parameter): who drives
//! communication besides the application's MPI calls. Parsed once, when
//! the runtime starts; everything else asks the enum.

use crate::params::Settings;

/// Who drives communication, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Policy {
    /// Every MPI call drives every transport (what the common MPI
    /// libraries do).
    Poll,
    /// MPI calls drive only transports with work, idle TCP now and then.
    Adaptive,
    /// Also a helper thread, asleep until a transport has news, drives
    /// communication while the application computes (see helper.rs).
    Thread,
    /// A helper thread woken only by rendezvous starts signals the
    /// application thread, whose handler answers them (see signal.rs).
    Signal,
}

impl Policy {
    /// The policy the `progress` parameter names.
    pub fn from_settings(settings: &Settings) -> Policy {
        Policy::from_name(settings.text("progress")).unwrap_or(Policy::Adaptive)
    }

    /// The policy named `name`, as the registry spells it.
    pub fn from_name(name: &str) -> Option<Policy> {
        match name {
            "poll" => Some(Policy::Poll),
            "adaptive" => Some(Policy::Adaptive),
            "thread" => Some(Policy::Thread),
            "signal" => Some(Policy::Signal),
            _ => None,
        }
    }

    /// Whether every call drives every transport, idle ones included.
    pub fn polls_everything(self) -> bool {
        self == Policy::Poll
    }

    /// Whether a helper thread drives communication (or signals the
    /// application to) while the application is outside the library.
    pub fn has_helper(self) -> bool {
        matches!(self, Policy::Thread | Policy::Signal)
    }
}

#[cfg(test)]
mod tests {
    use super::Policy;
    use crate::params::{lookup, Kind, Settings};

    #[test]
    fn every_choice_of_the_parameter_names_a_policy() {
        let Kind::Choice(names) = lookup("progress").unwrap().kind else {
            panic!("progress is a choice");
        };
        let policies: Vec<Policy> = names
            .iter()
            .map(|n| Policy::from_name(n).unwrap_or_else(|| panic!("{n} names no policy")))
            .collect();
        for (i, p) in policies.iter().enumerate() {
            assert!(!policies[..i].contains(p), "two names for {p:?}");
        }
    }

    #[test]
    fn the_default_is_adaptive_and_the_parameter_chooses() {
        let default = Settings::from_vars(Vec::new()).unwrap();
        assert_eq!(Policy::from_settings(&default), Policy::Adaptive);
        let thread =
            Settings::from_vars(vec![("TANDEM_PROGRESS".into(), "thread".into())]).unwrap();
        assert_eq!(Policy::from_settings(&thread), Policy::Thread);
        assert!(Policy::Signal.has_helper() && !Policy::Poll.has_helper());
        assert!(Policy::Poll.polls_everything() && !Policy::Adaptive.polls_everything());
    }
}
