//! docs/CLAIMS.md is the claim-to-line map rendered from the code and the pinned quick results
//! (`bfq_suite::claims_doc::claims_markdown` over `docs/results/results.json`): this test renders it again and
//! fails when the file differs, so the table cannot drift from the claims, the seeds' sentence map or the results.
//! After an intended change (a new claim, regenerated `docs/results`):
//!
//! ```sh
//! BFQ_UPDATE_DOCS=1 cargo test --release -p bfq-suite --test claims_doc
//! ```

use bfq_suite::claims_doc::claims_markdown;
use bfq_suite::RunResult;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/results/results.json");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CLAIMS.md");

#[test]
fn docs_claims_table_is_generated_from_the_code_and_the_quick_results() {
    let json = std::fs::read_to_string(RESULTS).expect("docs/results/results.json");
    let runs: Vec<RunResult> = serde_json::from_str(&json).expect("results.json parses");
    let want = claims_markdown(&runs);
    if std::env::var_os("BFQ_UPDATE_DOCS").is_some() {
        std::fs::write(DOC, &want).expect("writes docs/CLAIMS.md");
        return;
    }
    let got = std::fs::read_to_string(DOC).unwrap_or_default();
    assert!(
        got == want,
        "docs/CLAIMS.md is not what the code and docs/results/results.json give; regenerate it with \
         BFQ_UPDATE_DOCS=1 cargo test --release -p bfq-suite --test claims_doc"
    );
}
