//! `init`.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{resolve_path, Ctx};
use crate::error::{IoContext, Result};
use crate::repo;

/// `init [DIR] [--store URL] [--force]`.
pub(super) fn init(
    ctx: &Ctx,
    dir: Option<PathBuf>,
    store: Option<&str>,
    force: bool,
) -> Result<()> {
    let dir = resolve_path(ctx, dir.as_deref().unwrap_or(Path::new(".")));
    std::fs::create_dir_all(&dir).at(&dir)?;
    let created = repo::init(&dir, store, force)?;
    let wd = &created.workdir;
    let shown = crate::secrets::redact(&wd.store_url);
    // A store that holds the current branch already (one shared with another
    // working directory): this one is empty, and a commit now would record every
    // file of the branch as removed.
    let existing = wd.head_commit()?.zip(wd.head().ok());
    let existing_json = existing.as_ref().map(|(id, _)| id.to_string());
    ctx.print(
        json!({"root": wd.root, "store": shown, "credentials": created.credentials, "branch_tip": existing_json}),
        |w| {
            writeln!(
                w,
                "initialized snapgraph repository in {} (store {shown})",
                wd.dot.display()
            )?;
            if let Some((id, repo::Head::Branch(b))) = &existing {
                writeln!(
                    w,
                    "the store holds branch {b} at {id}: `snapgraph checkout {b}` fills this directory with it (a commit first would record its files as removed)"
                )?;
            }
            if let Some(c) = &created.credentials {
                writeln!(
                    w,
                    "the store password is kept in {} (mode 0600), not in the config",
                    c.display()
                )?;
            }
            Ok(())
        },
    )
}
