//! Writes the current format version's corpus artifacts to `corpus/v<FORMAT_VERSION>/`.
//!
//! `cargo run -p snapgraph --example gen_corpus`
//!
//! Refuses to touch a directory whose files already exist with other contents: a
//! released version's artifacts are never rewritten (bump the format version instead).

#[path = "../tests/corpus_gen/mod.rs"]
mod corpus_gen;

use std::path::Path;

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../corpus")
        .join(format!("v{}", snapgraph::FORMAT_VERSION));
    std::fs::create_dir_all(&dir)?;
    let artifacts = corpus_gen::build();
    let mut conflicts = Vec::new();
    for (name, bytes) in &artifacts.files {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(existing) if existing == *bytes => println!("unchanged {}", path.display()),
            Ok(_) => conflicts.push(path),
            Err(_) => {
                std::fs::write(&path, bytes)?;
                println!("wrote {} ({} bytes)", path.display(), bytes.len());
            }
        }
    }
    if !conflicts.is_empty() {
        eprintln!("refusing to rewrite released artifacts (bump FORMAT_VERSION instead):");
        for c in conflicts {
            eprintln!("  {}", c.display());
        }
        std::process::exit(1);
    }
    Ok(())
}
