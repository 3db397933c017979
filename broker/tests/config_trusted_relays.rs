//! `limits.trusted_relays` through the config loader: a file listing edges loads into the
//! protocol config the ledger gets, a bad entry is an error naming the key, the entry and
//! what is wrong, and a reload may change the list.

use bps_broker::config::{BrokerConfig, ConfigSources, reloadable_diff};
use bps_broker::protocol::PeerId;

const NO_ENV: [(&str, &str); 0] = [];

fn with_sets(sets: &[(&str, &str)]) -> ConfigSources {
    ConfigSources {
        sets: sets
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..ConfigSources::default()
    }
}

fn peer(text: &str) -> PeerId {
    PeerId::of(text.parse().expect("literal address"))
}

#[test]
fn a_config_with_trusted_relays_loads_with_its_raised_bounds() {
    let config = BrokerConfig::from_toml_str(
        "[limits]\n\
         trusted_relays = [\"192.0.2.7\", \"10.1.0.0/16\", \"2001:db8:5::/48\"]\n\
         trusted_relay_cohorts_max = 600\n",
    )
    .expect("loads");
    assert!(config.validate().is_empty(), "{:?}", config.validate());
    let protocol = config.effective_protocol();
    let relays = &protocol.trusted_relays;
    assert!(relays.contains(peer("192.0.2.7")));
    assert!(relays.contains(peer("10.1.44.3")));
    assert!(relays.contains(peer("2001:db8:5:9::1")));
    assert!(!relays.contains(peer("192.0.2.8")));
    assert!(!relays.contains(peer("2001:db8:6::1")));
    assert_eq!(protocol.trusted_relay_cohorts_max, 600);
    assert_eq!(
        protocol.trusted_relay_streams_per_cohort_max,
        BrokerConfig::default()
            .protocol
            .trusted_relay_streams_per_cohort_max
    );
}

#[test]
fn a_bad_entry_is_an_error_naming_the_key_and_the_entry() {
    for (entry, expected) in [
        ("edge-1.example", "not an IP address or CIDR prefix"),
        ("10.1.2.3/16", "did you mean \"10.1.0.0/16\""),
        ("10.0.0.0/40", "from 0 to 32"),
    ] {
        let text = format!("[limits]\ntrusted_relays = [\"192.0.2.7\", \"{entry}\"]\n");
        let errors = BrokerConfig::from_toml_str(&text).expect_err("refused");
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            shown
                .iter()
                .any(|line| line.contains("limits.trusted_relays")
                    && line.contains(entry)
                    && line.contains(expected)),
            "{entry}: {shown:?}"
        );
    }
}

#[test]
fn an_entry_on_the_command_line_is_checked_too() {
    let errors = BrokerConfig::load(
        &with_sets(&[("limits.trusted_relays", "192.0.2.7,nope")]),
        NO_ENV,
    )
    .expect_err("refused");
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        shown
            .iter()
            .any(|line| line.contains("limits.trusted_relays") && line.contains("nope")),
        "{shown:?}"
    );
}

#[test]
fn a_reload_may_change_the_trusted_relays() {
    let old = BrokerConfig::default();
    let new = BrokerConfig::load(
        &with_sets(&[("limits.trusted_relays", "192.0.2.7")]),
        NO_ENV,
    )
    .expect("loads");
    let changes = reloadable_diff(&old, &new).expect("reloadable");
    assert!(
        changes
            .iter()
            .any(|change| change.starts_with("limits.trusted_relays")),
        "{changes:?}"
    );
}
