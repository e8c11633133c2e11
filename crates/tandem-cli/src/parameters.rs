//! Parameters from the command line (`--set name=value`) and from the
//! environment (`TANDEM_<NAME>`), checked against the core's registry.

use tandem::params::{self, Settings};

pub use tandem::params::TOOL_ENV as TOOL_VARS;

/// The launcher's `TANDEM_*` environment variables that should be parameters
/// (job and tool variables left out). A value that is not UTF-8 is kept as
/// an error message instead.
pub fn parameter_vars() -> Vec<(String, Result<String, String>)> {
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let key = k.into_string().ok()?;
            if !key.starts_with(params::ENV_PREFIX)
                || key.starts_with(params::JOB_ENV_PREFIX)
                || TOOL_VARS.contains(&key.as_str())
            {
                return None;
            }
            let value = v
                .into_string()
                .map_err(|_| format!("environment variable {key}: the value is not valid UTF-8"));
            Some((key, value))
        })
        .collect()
}

/// The settings in force, like `Settings::from_env` but tolerant of the
/// tool variables and of unrelated variables that are not UTF-8.
pub fn settings_from_env() -> Result<Settings, String> {
    let mut vars = Vec::new();
    for (key, value) in parameter_vars() {
        vars.push((key, value?));
    }
    Settings::from_vars(vars)
}

/// Checks `--set NAME=VALUE` items; returns the `TANDEM_<NAME>` variables
/// that carry them to the ranks (the last of repeated names wins).
pub fn parse_set_items(items: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in items {
        let Some((name, value)) = item.split_once('=') else {
            return Err(format!("--set expects NAME=VALUE, got '{item}'"));
        };
        let name = name.trim();
        let Some(param) = params::lookup(name) else {
            return Err(params::unknown_message(name));
        };
        param.parse(value)?;
        let var = params::env_name(param.name);
        out.retain(|(k, _)| *k != var);
        out.push((var, value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_items_become_variables() {
        let vars = parse_set_items(&[
            "eager_limit=128k".into(),
            "SPIN_US=3".into(),
            "spin_us=4".into(),
        ])
        .unwrap();
        assert_eq!(
            vars,
            vec![
                ("TANDEM_EAGER_LIMIT".to_string(), "128k".to_string()),
                ("TANDEM_SPIN_US".to_string(), "4".to_string())
            ]
        );
    }

    #[test]
    fn bad_set_items_explain_themselves() {
        assert!(parse_set_items(&["eager_limt=1".into()])
            .unwrap_err()
            .contains("eager_limit"));
        assert!(parse_set_items(&["spin_us=fast".into()])
            .unwrap_err()
            .contains("spin_us"));
        assert!(parse_set_items(&["spin_us".into()])
            .unwrap_err()
            .contains("NAME=VALUE"));
    }
}
