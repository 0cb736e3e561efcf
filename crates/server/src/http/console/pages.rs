//! The console's pages. Each one is LDAP operations as the signed-in identity
//! (`DirectoryClient`): a refusal is shown as the directory gave it (a password policy's
//! "Password is in history of old passwords", "insufficient access"), never worked around.
//! Lists are one sorted search cut by a virtual list view, `PAGE_ENTRIES` at a time; a group's
//! members are listed by searching `memberOf=<group>`, so a group of 100,000 is never read
//! whole into a page.

use super::{csrf_field, escape, page, redirect, Notice, Signed};
use crate::http::directory::{
    sort_control, vlv_control, vlv_response, FoundEntry, LdapFailure, Search,
};
use crate::http::scim::resource::{escape_rdn_value, Kind};
use crate::http::{HttpRequest, HttpResponse, HttpState};
use hyper::Method;
use ldap3_proto::proto::{LdapModifyType, LdapSearchScope};
use lmdir_schema::Filter;
use std::fmt::Write;

/// Entries on one page of a list.
const PAGE_ENTRIES: u32 = 20;
/// Attributes a person may edit on their own entry (as far as the access policy lets them).
const OWN_FIELDS: &[(&str, &str)] = &[
    ("displayName", "Display name"),
    ("title", "Title"),
    ("telephoneNumber", "Telephone"),
    ("mail", "E-mail"),
];
/// Attributes an administrator edits on a user.
const USER_FIELDS: &[(&str, &str)] = &[
    ("cn", "Full name"),
    ("givenName", "Given name"),
    ("sn", "Surname"),
    ("displayName", "Display name"),
    ("mail", "E-mail"),
    ("title", "Title"),
    ("telephoneNumber", "Telephone"),
];

pub async fn route(state: &HttpState, request: &HttpRequest, signed: Signed) -> HttpResponse {
    let post = request.method == Method::POST;
    match (post, request.path.as_str()) {
        (false, "/me") => me(&signed, None).await,
        (true, "/me/edit") => me_edit(&signed).await,
        (true, "/me/password") => me_password(state, &signed).await,
        (false, "/users") => users(state, &signed, None).await,
        (true, "/users/new") => user_create(state, &signed).await,
        (false, "/user") => user(state, &signed, None).await,
        (true, "/user/edit") => user_edit(state, &signed).await,
        (true, "/user/rename") => rename(state, &signed, Kind::User).await,
        (true, "/user/delete") => delete(state, &signed, Kind::User).await,
        (true, "/user/password") => user_password(state, &signed).await,
        (true, "/user/unlock") => user_unlock(state, &signed).await,
        (false, "/groups") => groups(state, &signed, None).await,
        (true, "/groups/new") => group_create(state, &signed).await,
        (false, "/group") => group(state, &signed, None).await,
        (true, "/group/add") => group_members(state, &signed, true).await,
        (true, "/group/remove") => group_members(state, &signed, false).await,
        (true, "/group/rename") => rename(state, &signed, Kind::Group).await,
        (true, "/group/delete") => delete(state, &signed, Kind::Group).await,
        (false, "/status") => super::status::status(state, &signed),
        _ => page(
            "Not found",
            Some(&signed),
            Notice::error("No such page.").as_ref(),
            "",
        ),
    }
}

fn failure_text(failure: &LdapFailure) -> String {
    let what = match failure.code {
        50 => "not allowed for you",
        32 => "no such entry (or not visible to you)",
        19 if failure.message.to_ascii_lowercase().contains("password") => {
            "refused by the password policy"
        }
        68 => "that entry already exists",
        49 => "wrong password",
        _ => "refused by the directory",
    };
    if failure.message.is_empty() {
        format!("{what} (LDAP {})", failure.code)
    } else {
        format!("{what}: {} (LDAP {})", failure.message, failure.code)
    }
}

fn input(name: &str, label: &str, value: &str, kind: &str) -> String {
    format!(
        "<label>{} <input name=\"{}\" id=\"{}\" type=\"{kind}\" value=\"{}\"></label>",
        escape(label),
        escape(name),
        escape(name),
        escape(value)
    )
}

fn form(action: &str, csrf: &str, inner: &str, button: &str, id: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{action}\" class=\"card\">{}{inner}<button id=\"{id}\">{}</button></form>",
        csrf_field(csrf),
        escape(button)
    )
}

fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
        escape(name),
        escape(value)
    )
}

async fn me(signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let dn = signed.client.identity().dn.clone();
    if signed.client.must_change_password() {
        return must_change_page(signed, notice);
    }
    let mut names: Vec<String> = OWN_FIELDS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    names.extend(["uid", "cn", "memberOf", "pwdChangedTime"].map(str::to_string));
    let entry = match signed.client.read(&dn, names).await {
        Ok(entry) => entry.unwrap_or_default(),
        Err(failure) => {
            return page(
                "My account",
                Some(signed),
                Notice::error(failure_text(&failure)).as_ref(),
                "",
            )
        }
    };
    let mut body = format!(
        "<p class=\"card\">Signed in as <b id=\"me-dn\">{}</b></p>",
        escape(&dn)
    );
    let groups: Vec<String> = entry
        .values("memberOf")
        .map(|dn| escape(&String::from_utf8_lossy(dn)))
        .collect();
    if !groups.is_empty() {
        let _ = write!(body, "<p>Member of: {}</p>", groups.join("; "));
    }
    body.push_str("<h2>Change my password</h2>");
    let fields = input("old", "Current password", "", "password")
        + &input("new", "New password", "", "password")
        + &input("again", "New password again", "", "password");
    body.push_str(&form(
        "/me/password",
        &signed.csrf,
        &fields,
        "Change password",
        "change-password",
    ));
    body.push_str("<h2>My details</h2>");
    let fields: String = OWN_FIELDS
        .iter()
        .map(|(name, label)| {
            input(
                name,
                label,
                &entry.first_text(name).unwrap_or_default(),
                "text",
            )
        })
        .collect();
    body.push_str(&form("/me/edit", &signed.csrf, &fields, "Save", "save-me"));
    page("My account", Some(signed), notice.as_ref(), &body)
}

/// The only page of a session signed in with a reset password: its change.
fn must_change_page(signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let notice = notice.or_else(|| {
        Notice::error("Your password was reset by an administrator: choose a new one to go on.")
    });
    let fields = input("old", "Current password", "", "password")
        + &input("new", "New password", "", "password")
        + &input("again", "New password again", "", "password");
    let body = form(
        "/me/password",
        &signed.csrf,
        &fields,
        "Change password",
        "change-password",
    );
    page("Change your password", Some(signed), notice.as_ref(), &body)
}

/// Replace operations for the `fields` of the form (an empty value deletes the attribute).
fn replacements(
    signed: &Signed,
    fields: &[(&str, &str)],
) -> Vec<(LdapModifyType, String, Vec<Vec<u8>>)> {
    fields
        .iter()
        .filter(|(name, _)| signed.form.contains_key(*name))
        .map(|(name, _)| {
            let value = signed.field(name).trim();
            let values = if value.is_empty() {
                Vec::new()
            } else {
                vec![value.as_bytes().to_vec()]
            };
            (LdapModifyType::Replace, name.to_string(), values)
        })
        .collect()
}

/// Only attributes whose value differs from the entry's: a page that shows an attribute the
/// identity may read but not write still saves the others.
async fn changed_only(
    signed: &Signed,
    dn: &str,
    changes: Vec<(LdapModifyType, String, Vec<Vec<u8>>)>,
) -> Result<Vec<(LdapModifyType, String, Vec<Vec<u8>>)>, LdapFailure> {
    let names = changes.iter().map(|(_, name, _)| name.clone()).collect();
    let entry = signed.client.read(dn, names).await?.unwrap_or_default();
    Ok(changes
        .into_iter()
        .filter(|(_, name, values)| {
            let current: Vec<&[u8]> = entry.values(name).collect();
            current != values.iter().map(Vec::as_slice).collect::<Vec<_>>()
        })
        .collect())
}

async fn me_edit(signed: &Signed) -> HttpResponse {
    let dn = signed.client.identity().dn.clone();
    let outcome = match changed_only(signed, &dn, replacements(signed, OWN_FIELDS)).await {
        Ok(changes) if changes.is_empty() => Ok(()),
        Ok(changes) => signed.client.modify(&dn, changes, None).await,
        Err(failure) => Err(failure),
    };
    match outcome {
        Ok(()) => me(signed, Notice::ok("Saved.")).await,
        Err(failure) => me(signed, Notice::error(failure_text(&failure))).await,
    }
}

async fn me_password(state: &HttpState, signed: &Signed) -> HttpResponse {
    if signed.field("new") != signed.field("again") {
        return me(signed, Notice::error("The two new passwords differ.")).await;
    }
    let dn = signed.client.identity().dn.clone();
    let old = signed.field("old");
    match signed
        .client
        .change_password(&dn, Some(old), signed.field("new"))
        .await
    {
        Ok(()) => {
            // The change also cleared this request's restriction (the Password Modify it ran
            // shares the flag); the session's goes with it.
            // The session goes on with the new password; the account's others end.
            let mark = crate::http::auth::credential_mark(&state.server, &dn);
            state.console.password_changed(&signed.id, mark);
            me(signed, Notice::ok("Your password was changed.")).await
        }
        Err(failure) => me(signed, Notice::error(failure_text(&failure))).await,
    }
}

/// One page of a sorted list: (entries, total).
async fn list_page(
    signed: &Signed,
    base: &str,
    filter: &Filter,
    sort: &str,
    page_number: u32,
    attributes: &[&str],
) -> Result<(Vec<FoundEntry>, i64), LdapFailure> {
    let offset = page_number.saturating_sub(1) * PAGE_ENTRIES + 1;
    let outcome = signed
        .client
        .search(Search {
            base,
            scope: LdapSearchScope::Subtree,
            filter,
            attributes: attributes.iter().map(|name| name.to_string()).collect(),
            size_limit: 0,
            controls: vec![
                sort_control(sort, false),
                vlv_control(offset, PAGE_ENTRIES - 1),
            ],
        })
        .await;
    match outcome {
        Ok(outcome) => {
            let total = vlv_response(&outcome.controls)
                .map_or(outcome.entries.len() as i64, |(_, total, _)| total);
            Ok((outcome.entries, total))
        }
        Err(failure) if failure.code == 32 => Ok((Vec::new(), 0)),
        Err(failure) => Err(failure),
    }
}

/// `(class)` and, for a search text, any of `names` containing it.
fn search_filter(class: &str, names: &[&str], text: &str) -> Filter {
    let class = Filter::Equality {
        description: "objectClass".into(),
        value: class.as_bytes().to_vec(),
    };
    let text = text.trim();
    if text.is_empty() {
        return class;
    }
    let any = names
        .iter()
        .map(|name| Filter::Substrings {
            description: name.to_string(),
            initial: None,
            any: vec![text.as_bytes().to_vec()],
            final_: None,
        })
        .collect();
    Filter::And(vec![class, Filter::Or(any)])
}

/// A listing's table: a header row of `columns`' titles, then one row per entry of the
/// `columns`' attributes (first value, escaped), the first linking to `link` with the entry's
/// DN.
fn entry_table(body: &mut String, link: &str, columns: &[(&str, &str)], entries: &[FoundEntry]) {
    body.push_str("<table><tr>");
    for (title, _) in columns {
        let _ = write!(body, "<th>{}</th>", escape(title));
    }
    body.push_str("</tr>");
    for entry in entries {
        let encoded: String = form_urlencoded::byte_serialize(entry.dn.as_bytes()).collect();
        body.push_str("<tr>");
        for (position, (_, attribute)) in columns.iter().enumerate() {
            let text = escape(&entry.first_text(attribute).unwrap_or_default());
            let _ = match position {
                0 => write!(body, "<td><a href=\"{link}?dn={encoded}\">{text}</a></td>"),
                _ => write!(body, "<td>{text}</td>"),
            };
        }
        body.push_str("</tr>");
    }
    body.push_str("</table>");
}

fn page_links(path: &str, extra: &str, page_number: u32, total: i64) -> String {
    let pages = (total.max(0) as u32).div_ceil(PAGE_ENTRIES).max(1);
    let mut links = format!("<p class=\"pages\">Page {page_number} of {pages} ({total} in all) ");
    if page_number > 1 {
        let _ = write!(
            links,
            "<a id=\"previous\" href=\"{path}?page={}{extra}\">previous</a>",
            page_number - 1
        );
    }
    if page_number < pages {
        let _ = write!(
            links,
            "<a id=\"next\" href=\"{path}?page={}{extra}\">next</a>",
            page_number + 1
        );
    }
    links.push_str("</p>");
    links
}

fn page_number(signed: &Signed) -> u32 {
    signed
        .field("page")
        .parse::<u32>()
        .unwrap_or(1)
        .clamp(1, 1_000_000)
}

fn query_part(name: &str, value: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    format!("&amp;{name}={encoded}")
}

async fn users(state: &HttpState, signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let mapping = &state.scim.mapping;
    let text = signed.field("q").to_string();
    let filter = search_filter(mapping.class(Kind::User), &["uid", "cn", "mail"], &text);
    let number = page_number(signed);
    let listed = list_page(
        signed,
        &mapping.users_base,
        &filter,
        "uid",
        number,
        &["uid", "cn", "mail"],
    )
    .await;
    let mut body = format!(
        "<form method=\"get\" action=\"/users\" class=\"card\"><input name=\"q\" id=\"q\" value=\"{}\" placeholder=\"uid, name or e-mail\"> <button id=\"search\">Search</button></form>",
        escape(&text)
    );
    match listed {
        Err(failure) => {
            return page(
                "Users",
                Some(signed),
                Notice::error(failure_text(&failure)).as_ref(),
                &body,
            )
        }
        Ok((entries, total)) => {
            let columns = [("uid", "uid"), ("name", "cn"), ("e-mail", "mail")];
            entry_table(&mut body, "/user", &columns, &entries);
            body.push_str(&page_links(
                "/users",
                &query_part("q", &text),
                number,
                total,
            ));
        }
    }
    body.push_str("<h2>New user</h2>");
    let fields = input("uid", "User name (uid)", "", "text")
        + &input("givenName", "Given name", "", "text")
        + &input("sn", "Surname", "", "text")
        + &input("mail", "E-mail", "", "email")
        + &input("password", "Initial password", "", "password");
    body.push_str(&form(
        "/users/new",
        &signed.csrf,
        &fields,
        "Create user",
        "create-user",
    ));
    page("Users", Some(signed), notice.as_ref(), &body)
}

async fn user_create(state: &HttpState, signed: &Signed) -> HttpResponse {
    let mapping = &state.scim.mapping;
    let uid = signed.field("uid").trim().to_string();
    if uid.is_empty() {
        return users(state, signed, Notice::error("A user needs a user name.")).await;
    }
    let surname = Some(signed.field("sn").trim())
        .filter(|sn| !sn.is_empty())
        .unwrap_or(&uid)
        .to_string();
    let given = signed.field("givenName").trim().to_string();
    let full = if given.is_empty() {
        surname.clone()
    } else {
        format!("{given} {surname}")
    };
    let mut attributes = vec![
        (
            "objectClass".to_string(),
            mapping
                .user_classes
                .iter()
                .map(|class| class.as_bytes().to_vec())
                .collect(),
        ),
        ("uid".to_string(), vec![uid.clone().into_bytes()]),
        ("sn".to_string(), vec![surname.into_bytes()]),
        ("cn".to_string(), vec![full.into_bytes()]),
    ];
    for (name, value) in [
        ("givenName", given.as_str()),
        ("mail", signed.field("mail").trim()),
        ("userPassword", signed.field("password")),
    ] {
        if !value.is_empty() {
            attributes.push((name.to_string(), vec![value.as_bytes().to_vec()]));
        }
    }
    let dn = format!("uid={},{}", escape_rdn_value(&uid), mapping.users_base);
    match signed
        .client
        .add(FoundEntry {
            dn: dn.clone(),
            attributes,
        })
        .await
    {
        Ok(()) => redirect(&format!(
            "/user?dn={}",
            form_urlencoded::byte_serialize(dn.as_bytes()).collect::<String>()
        )),
        Err(failure) => users(state, signed, Notice::error(failure_text(&failure))).await,
    }
}

fn dn_field(signed: &Signed) -> String {
    signed.field("dn").to_string()
}

async fn user(state: &HttpState, signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let dn = dn_field(signed);
    let mut names: Vec<String> = USER_FIELDS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    names.extend(["uid", "memberOf", "pwdAccountLockedTime", "pwdFailureTime"].map(str::to_string));
    let entry = match signed.client.read(&dn, names).await {
        Ok(Some(entry)) => entry,
        Ok(None) => {
            return users(
                state,
                signed,
                Notice::error("No such user (or not visible to you)."),
            )
            .await
        }
        Err(failure) => return users(state, signed, Notice::error(failure_text(&failure))).await,
    };
    let keep = hidden("dn", &dn);
    let mut body = format!("<p class=\"card\">{}</p>", escape(&dn));
    body.push_str(&lock_section(signed, &entry, &keep));
    let groups: Vec<String> = entry
        .values("memberOf")
        .map(|dn| escape(&String::from_utf8_lossy(dn)))
        .collect();
    let groups = if groups.is_empty() {
        "none".to_string()
    } else {
        groups.join("; ")
    };
    let _ = write!(body, "<p>Groups: {groups}</p><h2>Details</h2>");
    let fields: String = USER_FIELDS
        .iter()
        .map(|(name, label)| {
            input(
                name,
                label,
                &entry.first_text(name).unwrap_or_default(),
                "text",
            )
        })
        .collect();
    body.push_str(&form(
        "/user/edit",
        &signed.csrf,
        &(keep.clone() + &fields),
        "Save",
        "save-user",
    ));
    body.push_str("<h2>Reset password</h2>");
    let fields = keep.clone() + &input("password", "New password", "", "password");
    body.push_str(&form(
        "/user/password",
        &signed.csrf,
        &fields,
        "Reset password",
        "reset-password",
    ));
    body.push_str("<h2>Rename or delete</h2>");
    let uid = entry.first_text("uid").unwrap_or_default();
    let fields = keep.clone() + &input("name", "New user name (uid)", &uid, "text");
    body.push_str(&form(
        "/user/rename",
        &signed.csrf,
        &fields,
        "Rename",
        "rename",
    ));
    body.push_str(&form(
        "/user/delete",
        &signed.csrf,
        &keep,
        "Delete this user",
        "delete",
    ));
    page("User", Some(signed), notice.as_ref(), &body)
}

/// The account's lock state, with the unlock button when there is something to clear.
fn lock_section(signed: &Signed, entry: &FoundEntry, keep: &str) -> String {
    let locked = entry.first_text("pwdAccountLockedTime");
    let failures = entry.values("pwdFailureTime").count();
    let state = match &locked {
        Some(at) => format!("Locked (since {})", escape(at)),
        None if failures > 0 => format!("Not locked ({failures} recent failed sign-ins)"),
        None => "Not locked".to_string(),
    };
    let mut html = format!("<p id=\"lock-state\">{state}</p>");
    if locked.is_some() || failures > 0 {
        html.push_str(&form(
            "/user/unlock",
            &signed.csrf,
            keep,
            "Unlock",
            "unlock",
        ));
    }
    html
}

async fn user_edit(state: &HttpState, signed: &Signed) -> HttpResponse {
    let dn = dn_field(signed);
    let outcome = match changed_only(signed, &dn, replacements(signed, USER_FIELDS)).await {
        Ok(changes) if changes.is_empty() => Ok(()),
        Ok(changes) => signed.client.modify(&dn, changes, None).await,
        Err(failure) => Err(failure),
    };
    let notice = match outcome {
        Ok(()) => Notice::ok("Saved."),
        Err(failure) => Notice::error(failure_text(&failure)),
    };
    user(state, signed, notice).await
}

async fn user_password(state: &HttpState, signed: &Signed) -> HttpResponse {
    let dn = dn_field(signed);
    // The reset form sets a password without the current one: one's own goes through the
    // account page, which asks for it (else whoever holds a session takes the account).
    let own = &signed.client.identity().dn;
    if crate::context::same_dn(&state.server, own, &dn) {
        let notice = Notice::error("Change your own password on your account page.");
        return user(state, signed, notice).await;
    }
    let notice = match signed
        .client
        .change_password(&dn, None, signed.field("password"))
        .await
    {
        Ok(()) => Notice::ok("The password was reset."),
        Err(failure) => Notice::error(failure_text(&failure)),
    };
    user(state, signed, notice).await
}

async fn user_unlock(state: &HttpState, signed: &Signed) -> HttpResponse {
    let dn = dn_field(signed);
    // As slapd: an administrator deletes pwdAccountLockedTime; the failure times (which no
    // client writes) are cleared by the next successful bind.
    let changes = vec![(
        LdapModifyType::Replace,
        "pwdAccountLockedTime".to_string(),
        Vec::new(),
    )];
    let notice = match signed.client.modify(&dn, changes, None).await {
        Ok(()) => Notice::ok("Unlocked."),
        Err(failure) => Notice::error(failure_text(&failure)),
    };
    user(state, signed, notice).await
}

async fn rename(state: &HttpState, signed: &Signed, kind: Kind) -> HttpResponse {
    let dn = dn_field(signed);
    let name = signed.field("name").trim().to_string();
    let naming = state.scim.mapping.naming(kind);
    let rdn = format!("{naming}={}", escape_rdn_value(&name));
    // After the first unescaped comma: a name may hold one ("cn=Sales\, EMEA,...").
    let parent = lmdir_schema::normalized_dn_parent(&dn).unwrap_or_default();
    let path = if kind == Kind::User {
        "/user"
    } else {
        "/group"
    };
    match signed.client.rename(&dn, &rdn, None).await {
        Ok(()) => {
            let new_dn = format!("{rdn},{parent}");
            redirect(&format!(
                "{path}?dn={}",
                form_urlencoded::byte_serialize(new_dn.as_bytes()).collect::<String>()
            ))
        }
        Err(failure) if kind == Kind::User => {
            user(state, signed, Notice::error(failure_text(&failure))).await
        }
        Err(failure) => group(state, signed, Notice::error(failure_text(&failure))).await,
    }
}

async fn delete(state: &HttpState, signed: &Signed, kind: Kind) -> HttpResponse {
    let dn = dn_field(signed);
    match (signed.client.delete(&dn, None).await, kind) {
        (Ok(()), Kind::User) => users(state, signed, Notice::ok(format!("Deleted {dn}."))).await,
        (Ok(()), Kind::Group) => groups(state, signed, Notice::ok(format!("Deleted {dn}."))).await,
        (Err(failure), Kind::User) => {
            user(state, signed, Notice::error(failure_text(&failure))).await
        }
        (Err(failure), Kind::Group) => {
            group(state, signed, Notice::error(failure_text(&failure))).await
        }
    }
}

async fn groups(state: &HttpState, signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let mapping = &state.scim.mapping;
    let text = signed.field("q").to_string();
    let filter = search_filter(mapping.class(Kind::Group), &["cn", "description"], &text);
    let number = page_number(signed);
    let mut body = format!(
        "<form method=\"get\" action=\"/groups\" class=\"card\"><input name=\"q\" id=\"q\" value=\"{}\" placeholder=\"group name\"> <button id=\"search\">Search</button></form>",
        escape(&text)
    );
    match list_page(
        signed,
        &mapping.groups_base,
        &filter,
        "cn",
        number,
        &["cn", "description"],
    )
    .await
    {
        Err(failure) => {
            return page(
                "Groups",
                Some(signed),
                Notice::error(failure_text(&failure)).as_ref(),
                &body,
            )
        }
        Ok((entries, total)) => {
            let columns = [("group", "cn"), ("description", "description")];
            entry_table(&mut body, "/group", &columns, &entries);
            body.push_str(&page_links(
                "/groups",
                &query_part("q", &text),
                number,
                total,
            ));
        }
    }
    body.push_str("<h2>New group</h2>");
    let fields = input("cn", "Group name", "", "text")
        + &input("member", "First member (user name or DN)", "", "text");
    body.push_str(&form(
        "/groups/new",
        &signed.csrf,
        &fields,
        "Create group",
        "create-group",
    ));
    page("Groups", Some(signed), notice.as_ref(), &body)
}

async fn group_create(state: &HttpState, signed: &Signed) -> HttpResponse {
    let mapping = &state.scim.mapping;
    let name = signed.field("cn").trim().to_string();
    if name.is_empty() {
        return groups(state, signed, Notice::error("A group needs a name.")).await;
    }
    let member = signed.field("member").trim();
    let member = if member.is_empty() {
        String::new()
    } else {
        state.scim.user_dn(member)
    };
    let dn = format!("cn={},{}", escape_rdn_value(&name), mapping.groups_base);
    let attributes = vec![
        (
            "objectClass".to_string(),
            mapping
                .group_classes
                .iter()
                .map(|class| class.as_bytes().to_vec())
                .collect(),
        ),
        ("cn".to_string(), vec![name.into_bytes()]),
        ("member".to_string(), vec![member.into_bytes()]),
    ];
    match signed
        .client
        .add(FoundEntry {
            dn: dn.clone(),
            attributes,
        })
        .await
    {
        Ok(()) => redirect(&format!(
            "/group?dn={}",
            form_urlencoded::byte_serialize(dn.as_bytes()).collect::<String>()
        )),
        Err(failure) => groups(state, signed, Notice::error(failure_text(&failure))).await,
    }
}

async fn group(state: &HttpState, signed: &Signed, notice: Option<Notice>) -> HttpResponse {
    let dn = dn_field(signed);
    let entry = match signed
        .client
        .read(&dn, vec!["cn".into(), "description".into()])
        .await
    {
        Ok(Some(entry)) => entry,
        Ok(None) => {
            return groups(
                state,
                signed,
                Notice::error("No such group (or not visible to you)."),
            )
            .await
        }
        Err(failure) => return groups(state, signed, Notice::error(failure_text(&failure))).await,
    };
    let keep = hidden("dn", &dn);
    let mut body = format!("<p class=\"card\">{}</p><h2>Members</h2>", escape(&dn));
    body.push_str(&members_section(state, signed, &dn, &keep).await);
    let fields = keep.clone() + &input("member", "Add member (user name or DN)", "", "text");
    body.push_str(&form(
        "/group/add",
        &signed.csrf,
        &fields,
        "Add member",
        "add-member",
    ));
    body.push_str("<h2>Rename or delete</h2>");
    let name = entry.first_text("cn").unwrap_or_default();
    let fields = keep.clone() + &input("name", "New name", &name, "text");
    body.push_str(&form(
        "/group/rename",
        &signed.csrf,
        &fields,
        "Rename",
        "rename",
    ));
    body.push_str(&form(
        "/group/delete",
        &signed.csrf,
        &keep,
        "Delete this group",
        "delete",
    ));
    page("Group", Some(signed), notice.as_ref(), &body)
}

/// One page of a group's members, found by `memberOf` (the group's own member values are
/// never read into the page), with a search box and remove buttons.
async fn members_section(state: &HttpState, signed: &Signed, dn: &str, keep: &str) -> String {
    let text = signed.field("q").to_string();
    let number = page_number(signed);
    let member_of = Filter::Equality {
        description: "memberOf".into(),
        value: dn.as_bytes().to_vec(),
    };
    let filter = match search_filter("top", &["uid", "cn"], &text) {
        Filter::And(mut parts) => {
            parts[0] = member_of;
            Filter::And(parts)
        }
        _ => member_of,
    };
    let mut html = format!(
        "<form method=\"get\" action=\"/group\" class=\"card\">{keep}<input name=\"q\" id=\"member-q\" \
         value=\"{}\" placeholder=\"search members\"> <button id=\"search-members\">Search</button></form>",
        escape(&text)
    );
    let suffix = &state.server.settings().suffix;
    match list_page(signed, suffix, &filter, "uid", number, &["uid", "cn"]).await {
        Err(failure) => {
            let _ = write!(
                html,
                "<p class=\"notice error\">{}</p>",
                escape(&failure_text(&failure))
            );
        }
        Ok((members, total)) => {
            html.push_str("<table id=\"members\"><tr><th>member</th><th></th></tr>");
            for member in &members {
                let fields = keep.to_string() + &hidden("member", &member.dn);
                let remove = form(
                    "/group/remove",
                    &signed.csrf,
                    &fields,
                    "Remove",
                    "remove-member",
                )
                .replace("class=\"card\"", "class=\"inline\"");
                let _ = write!(
                    html,
                    "<tr><td>{}</td><td>{remove}</td></tr>",
                    escape(&member.dn)
                );
            }
            html.push_str("</table>");
            let extra = query_part("dn", dn) + &query_part("q", &text);
            html.push_str(&page_links("/group", &extra, number, total));
        }
    }
    html
}

async fn group_members(state: &HttpState, signed: &Signed, add: bool) -> HttpResponse {
    let dn = dn_field(signed);
    let member = state.scim.user_dn(signed.field("member").trim());
    let changes = if add {
        vec![
            (
                LdapModifyType::Add,
                "member".to_string(),
                vec![member.into_bytes()],
            ),
            (
                LdapModifyType::Delete,
                "member".to_string(),
                vec![Vec::new()],
            ),
        ]
    } else {
        vec![(
            LdapModifyType::Delete,
            "member".to_string(),
            vec![member.into_bytes()],
        )]
    };
    let mut outcome = signed.client.modify_permissive(&dn, changes.clone()).await;
    if matches!(&outcome, Err(failure) if failure.code == 65) && !add {
        // The last member: groupOfNames needs one, the empty DN stands for none.
        let mut changes = changes;
        changes.push((LdapModifyType::Add, "member".to_string(), vec![Vec::new()]));
        outcome = signed.client.modify_permissive(&dn, changes).await;
    }
    let notice = match outcome {
        Ok(()) if add => Notice::ok("Member added."),
        Ok(()) => Notice::ok("Member removed."),
        Err(failure) => Notice::error(failure_text(&failure)),
    };
    group(state, signed, notice).await
}
