//! SCIM 2.0 over HTTPS against a real server: authentication, the resources' mapping, list
//! queries (filter, sort, pages), PATCH, PUT, DELETE, ETags, Bulk and errors, every request
//! over the wire.

use crate::common;

use common::http::Client;
use common::{root, TestServer, ROOT_DN, ROOT_PASSWORD};
use serde_json::json;

const USERS: &str = "/scim/v2/Users";
const GROUPS: &str = "/scim/v2/Groups";

fn start(people: usize, rules: Vec<lmdir_config::AccessRule>) -> (TestServer, Client) {
    let server = TestServer::start_populated(people, rules, |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let address = server.running().http_address().expect("http listener");
    let certificate = server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
        .expect("certificate");
    let client = Client::https(address, &certificate);
    (server, client)
}

fn admin(client: &Client) -> Client {
    client.basic(ROOT_DN, ROOT_PASSWORD)
}

#[test]
fn no_credentials_is_401_and_wrong_ones_too() {
    let (_server, client) = start(3, Vec::new());
    let answer = client.get(USERS);
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert!(answer
        .header("www-authenticate")
        .unwrap_or_default()
        .contains("Bearer"));
    assert_eq!(
        answer.json()["schemas"][0],
        "urn:ietf:params:scim:api:messages:2.0:Error"
    );
    assert_eq!(client.basic(ROOT_DN, "wrong").get(USERS).status, 401);
    assert_eq!(client.basic("u0000001", "wrong").get(USERS).status, 401);
    assert_eq!(client.bearer("lmdir.bm9wZQ.x").get(USERS).status, 401);
    assert_eq!(client.get("/scim/v2/ServiceProviderConfig").status, 401);
}

#[test]
fn users_are_read_filtered_sorted_and_paged() {
    let (_server, client) = start(30, Vec::new());
    let admin = admin(&client);
    let answer = admin.get("/scim/v2/Users?filter=userName%20eq%20%22u0000007%22");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let list = answer.json();
    assert_eq!(list["totalResults"], 1);
    let user = &list["Resources"][0];
    assert_eq!(user["userName"], "u0000007");
    assert_eq!(user["emails"][0]["value"], "u0000007@example.com");
    assert_eq!(user["name"]["formatted"], "Person 7");
    assert_eq!(user["active"], true);
    assert!(user.get("password").is_none() && !answer.text().contains("userPassword"));
    let id = user["id"].as_str().expect("id").to_string();
    let one = admin.get(&format!("{USERS}/{id}"));
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["userName"], "u0000007");
    assert!(one.header("etag").expect("etag").starts_with("W/\""));
    // A person with the same uid as a user logs in by userName (a bind of uid=...,ou=People).
    let person = client.basic("u0000003", common::PERSON_PASSWORD);
    assert_eq!(person.get(&format!("{USERS}/{id}")).status, 200);
    // Pages: sorted by userName descending, 7 a page, from the 8th.
    let page = admin
        .get("/scim/v2/Users?sortBy=userName&sortOrder=descending&startIndex=8&count=7")
        .json();
    assert_eq!(page["totalResults"], 30);
    assert_eq!(page["itemsPerPage"], 7);
    assert_eq!(page["startIndex"], 8);
    let names: Vec<&str> = page["Resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|user| user["userName"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["u0000022", "u0000021", "u0000020", "u0000019", "u0000018", "u0000017", "u0000016"]
    );
    let past_end = admin.get("/scim/v2/Users?startIndex=100&count=5").json();
    assert_eq!(past_end["Resources"].as_array().map_or(0, Vec::len), 0);
    let filtered = admin
        .get("/scim/v2/Users?filter=userName%20sw%20%22u000001%22%20and%20not%20(emails%20co%20%2215%22)&count=0")
        .json();
    assert_eq!(filtered["totalResults"], 9, "{filtered}");
    let bad = admin.get("/scim/v2/Users?filter=userName%20zz%20%22x%22");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["scimType"], "invalidFilter");
    assert_eq!(
        admin
            .get(&format!("{USERS}/00000000-0000-0000-0000-000000000000"))
            .status,
        404
    );
    assert_eq!(admin.get(&format!("{USERS}/not-a-uuid")).status, 404);
}

#[test]
fn a_user_lives_through_post_patch_put_and_delete() {
    let (server, client) = start(3, Vec::new());
    let admin = admin(&client);
    let created = admin.send_json(
        "POST",
        USERS,
        &json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "userName": "bjensen",
            "name": {"givenName": "Barbara", "familyName": "Jensen"},
            "emails": [{"value": "bjensen@example.com", "primary": true}],
            "password": "t1meMachine!",
            "externalId": "okta-42",
        }),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let location = created.header("location").expect("location").to_string();
    let user = created.json();
    let id = user["id"].as_str().unwrap().to_string();
    assert!(location.ends_with(&format!("/Users/{id}")));
    assert_eq!(user["externalId"], "okta-42");
    assert_eq!(user["name"]["familyName"], "Jensen");
    // The password went through userPassword (hashed) and binds over LDAP.
    common::bind(
        &server,
        "uid=bjensen,ou=People,dc=example,dc=com",
        "t1meMachine!",
    );
    assert_eq!(
        admin
            .send_json("POST", USERS, &json!({"userName": "bjensen"}))
            .status,
        409
    );
    // ETags: a stale If-Match is refused, the current one accepted.
    let etag = created.header("etag").unwrap().to_string();
    let patch = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [
            {"op": "replace", "path": "displayName", "value": "Babs"},
            {"op": "add", "path": "emails", "value": [{"value": "babs@example.com"}]},
            {"op": "remove", "path": "emails[value eq \"bjensen@example.com\"]"},
        ],
    });
    let patched = admin.request(
        "PATCH",
        &format!("{USERS}/{id}"),
        &[
            ("If-Match", &etag),
            ("Content-Type", "application/scim+json"),
        ],
        patch.to_string().as_bytes(),
    );
    assert_eq!(patched.status, 200, "{}", patched.text());
    let patched = patched.json();
    assert_eq!(patched["displayName"], "Babs");
    assert_eq!(patched["emails"], json!([{"value": "babs@example.com"}]));
    let stale = admin.request(
        "PATCH",
        &format!("{USERS}/{id}"),
        &[("If-Match", &etag), ("Content-Type", "application/json")],
        patch.to_string().as_bytes(),
    );
    assert_eq!(stale.status, 412, "{}", stale.text());
    // PUT replaces: what it leaves out is removed; a new userName renames the entry.
    let put = admin.send_json(
        "PUT",
        &format!("{USERS}/{id}"),
        &json!({"userName": "barbara", "name": {"givenName": "Barbara"}, "active": false}),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let put = put.json();
    assert_eq!(put["userName"], "barbara");
    assert_eq!(put["id"], id.as_str());
    assert!(put.get("emails").is_none() && put.get("displayName").is_none());
    assert_eq!(put["active"], false);
    let mut ldap = root(&server);
    let (entries, _) = ldap
        .search(
            "uid=barbara,ou=People,dc=example,dc=com",
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["pwdAccountLockedTime", "mail"],
        )
        .unwrap()
        .success()
        .unwrap();
    let entry = ldap3::SearchEntry::construct(entries.into_iter().next().expect("renamed entry"));
    assert_eq!(entry.attrs["pwdAccountLockedTime"], ["000001010000Z"]);
    assert!(!entry.attrs.contains_key("mail"));
    let deleted = admin.request("DELETE", &format!("{USERS}/{id}"), &[], b"");
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    assert_eq!(admin.get(&format!("{USERS}/{id}")).status, 404);
}

#[test]
fn groups_members_and_bulk() {
    let (_server, client) = start(5, Vec::new());
    let admin = admin(&client);
    let user_id = |uid: &str| {
        admin
            .get(&format!("{USERS}?filter=userName%20eq%20%22{uid}%22"))
            .json()["Resources"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (first, second) = (user_id("u0000001"), user_id("u0000002"));
    let created = admin.send_json(
        "POST",
        GROUPS,
        &json!({"displayName": "admins", "members": [{"value": first}]}),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let group = created.json();
    let group_id = group["id"].as_str().unwrap().to_string();
    assert_eq!(group["members"][0]["value"], first.as_str());
    assert!(group["members"][0]["$ref"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/Users/{first}")));
    let member_of = admin.get(&format!("{USERS}/{first}")).json();
    assert!(
        member_of["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|group| group["value"] == group_id.as_str()),
        "{member_of}"
    );
    let patch = |operations: serde_json::Value| {
        admin.send_json(
            "PATCH",
            &format!("{GROUPS}/{group_id}"),
            &json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": operations}),
        )
    };
    let added = patch(
        json!([{"op": "add", "path": "members", "value": [{"value": second}, {"value": first}]}]),
    );
    assert_eq!(added.status, 200, "{}", added.text());
    assert_eq!(added.json()["members"].as_array().unwrap().len(), 2);
    let by_member = admin
        .get(&format!("{GROUPS}?filter=members%20eq%20%22{second}%22"))
        .json();
    // group0000 of the fixture holds u0000002 too.
    assert_eq!(by_member["totalResults"], 2, "{by_member}");
    let removed =
        patch(json!([{"op": "remove", "path": format!("members[value eq \"{first}\"]")}]));
    assert_eq!(removed.json()["members"].as_array().unwrap().len(), 1);
    let emptied = patch(json!([{"op": "remove", "path": "members"}]));
    assert_eq!(emptied.status, 200, "{}", emptied.text());
    assert!(emptied.json().get("members").is_none());
    let bulk = admin.send_json(
        "POST",
        "/scim/v2/Bulk",
        &json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"],
            "Operations": [
                {"method": "POST", "path": "/Users", "bulkId": "u1", "data": {"userName": "bulk1"}},
                {"method": "POST", "path": "/Groups", "bulkId": "g1", "data": {"displayName": "bulkers", "members": [{"value": "bulkId:u1"}]}},
                {"method": "DELETE", "path": "/Users/00000000-0000-0000-0000-000000000000"},
            ],
        }),
    );
    assert_eq!(bulk.status, 200, "{}", bulk.text());
    let results = bulk.json()["Operations"].as_array().unwrap().clone();
    assert_eq!(results[0]["status"], "201");
    assert_eq!(results[1]["status"], "201", "{results:?}");
    assert_eq!(results[2]["status"], "404");
    let too_many: Vec<serde_json::Value> = (0..101)
        .map(|index| json!({"method": "DELETE", "path": format!("/Users/{index}")}))
        .collect();
    let refused = admin.send_json("POST", "/scim/v2/Bulk", &json!({"Operations": too_many}));
    assert_eq!(refused.status, 413);
    assert_eq!(
        admin
            .request("DELETE", &format!("{GROUPS}/{group_id}"), &[], b"")
            .status,
        204
    );
}

#[test]
fn discovery_endpoints_describe_what_is_mapped() {
    let (_server, client) = start(1, Vec::new());
    let admin = admin(&client);
    let config = admin.get("/scim/v2/ServiceProviderConfig").json();
    assert_eq!(config["patch"]["supported"], true);
    assert_eq!(config["bulk"]["maxOperations"], 100);
    let schemas = admin.get("/scim/v2/Schemas").json();
    assert_eq!(schemas["totalResults"], 2);
    let user = admin
        .get("/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:User")
        .json();
    let names: Vec<&str> = user["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|attribute| attribute["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"userName") && names.contains(&"groups") && names.contains(&"password")
    );
    let types = admin.get("/scim/v2/ResourceTypes").json();
    assert_eq!(types["Resources"][1]["endpoint"], "/Groups");
    assert_eq!(admin.get("/scim/v2/Nope").status, 404);
}

#[test]
fn active_false_locks_the_account_under_the_password_policy() {
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.password_policy_default = "cn=policy,dc=example,dc=com".to_string();
    });
    let mut ldap = root(&server);
    ldap.add(
        "cn=policy,dc=example,dc=com",
        vec![
            ("objectClass", ["organizationalRole", "pwdPolicy"].into()),
            ("cn", ["policy"].into()),
            ("pwdAttribute", ["userPassword"].into()),
            ("pwdLockout", ["TRUE"].into()),
            ("pwdLockoutDuration", ["60"].into()),
            ("pwdMaxFailure", ["3"].into()),
        ],
    )
    .unwrap()
    .success()
    .unwrap();
    let address = server.running().http_address().unwrap();
    let certificate = server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
        .unwrap();
    let client = Client::https(address, &certificate);
    let admin = admin(&client);
    // A token of its own: a deactivated account is locked for its tokens too.
    let token = common::http::issue_token(&mut ldap, &common::person_dn(1), "t0ken-of-a-person");
    let token_status = || client.bearer(&token).get(USERS).status;
    let id = admin
        .get(&format!("{USERS}?filter=userName%20eq%20%22u0000001%22"))
        .json()["Resources"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let active = |value: bool| {
        let answer = admin.send_json(
            "PATCH",
            &format!("{USERS}/{id}"),
            &json!({"Operations": [{"op": "replace", "path": "active", "value": value}]}),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.json()["active"], value);
    };
    let bind = || {
        let mut connection = ldap3::LdapConn::new(&server.ldap_url()).unwrap();
        connection
            .simple_bind(&common::person_dn(1), common::PERSON_PASSWORD)
            .unwrap()
            .rc
    };
    assert_eq!((bind(), token_status()), (0, 200));
    active(false);
    // Locked by an administrator: the right password is refused (past the 60 s duration too),
    // and so is the account's token (before: 200, the deactivated user kept its access).
    assert_eq!((bind(), token_status()), (49, 401));
    let locked = admin
        .get(&format!("{USERS}?filter=active%20eq%20false"))
        .json();
    assert_eq!(locked["totalResults"], 1, "{locked}");
    // A PUT that says nothing of `active` leaves the lock as it is (before: a missing value
    // was taken as true and the lock cleared).
    let put = admin.send_json(
        "PUT",
        &format!("{USERS}/{id}"),
        &json!({"userName": "u0000001", "title": "put without active"}),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(put.json()["active"], false, "{}", put.text());
    assert_eq!((bind(), token_status()), (49, 401));
    active(true);
    assert_eq!((bind(), token_status()), (0, 200));
}

/// A group named with a comma ("cn=Sales\, EMEA,ou=Groups,..."): a PUT that renames it and
/// changes its members took the parent after the first comma, escaped or not, and the change
/// after the rename went to a DN that does not exist (the group renamed, its members not).
#[test]
fn a_name_holding_a_comma_renames_and_changes_in_one_put() {
    let (_server, client) = start(5, Vec::new());
    let admin = admin(&client);
    let first = admin
        .get(&format!("{USERS}?filter=userName%20eq%20%22u0000001%22"))
        .json()["Resources"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let created = admin.send_json("POST", GROUPS, &json!({"displayName": "Sales, EMEA"}));
    assert_eq!(created.status, 201, "{}", created.text());
    let group_id = created.json()["id"].as_str().unwrap().to_string();
    let put = admin.send_json(
        "PUT",
        &format!("{GROUPS}/{group_id}"),
        &json!({"displayName": "Sales EMEA", "members": [{"value": first}]}),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let group = admin.get(&format!("{GROUPS}/{group_id}")).json();
    assert_eq!(group["displayName"], "Sales EMEA");
    assert_eq!(group["members"][0]["value"], first.as_str(), "{group}");
}

/// A PATCH or PUT is one LDAP transaction: when a later step fails, the rename before it is
/// not kept either (before, the 400 left the resource renamed).
#[test]
fn a_write_is_kept_whole_or_not_at_all() {
    let (server, client) = start(3, Vec::new());
    let admin = admin(&client);
    let created = admin.send_json("POST", GROUPS, &json!({"displayName": "atomic"}));
    assert_eq!(created.status, 201, "{}", created.text());
    let group = created.json()["id"].as_str().unwrap().to_string();
    let unknown = "00000000-0000-4000-8000-000000000000";
    let patch = json!({"Operations": [
        {"op": "replace", "path": "displayName", "value": "renamed"},
        {"op": "add", "path": "members", "value": [{"value": unknown}]},
    ]});
    let answer = admin.send_json("PATCH", &format!("{GROUPS}/{group}"), &patch);
    assert_eq!(answer.status, 400, "{}", answer.text());
    let read = admin.get(&format!("{GROUPS}/{group}")).json();
    assert_eq!(read["displayName"], "atomic", "{read}");
    // A step the writer refuses (a mail value that is not IA5) undoes the rename before it.
    let user = admin
        .get(&format!("{USERS}?filter=userName%20eq%20%22u0000001%22"))
        .json()["Resources"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = json!({"Operations": [
        {"op": "replace", "path": "userName", "value": "renamed1"},
        {"op": "replace", "path": "emails", "value": [{"value": "ünï@example.com"}]},
    ]});
    let answer = admin.send_json("PATCH", &format!("{USERS}/{user}"), &patch);
    assert_eq!(answer.status, 400, "{}", answer.text());
    let read = admin.get(&format!("{USERS}/{user}")).json();
    assert_eq!(read["userName"], "u0000001", "{read}");
    let mut ldap = root(&server);
    let (entries, _) = ldap
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::OneLevel,
            "(uid=renamed1)",
            vec!["uid"],
        )
        .unwrap()
        .success()
        .unwrap();
    assert!(entries.is_empty());
    // Within the bounds both steps are kept.
    let patch = json!({"Operations": [
        {"op": "replace", "path": "displayName", "value": "renamed"},
        {"op": "add", "path": "members", "value": [{"value": user}]},
    ]});
    let answer = admin.send_json("PATCH", &format!("{GROUPS}/{group}"), &patch);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["displayName"], "renamed");
    assert_eq!(answer.json()["members"][0]["value"], user);
    // A password changed in the same transaction as a rename is hashed and binds.
    let patch = json!({"Operations": [
        {"op": "replace", "path": "userName", "value": "renamed2"},
        {"op": "replace", "path": "password", "value": "n3w-Passw0rd"},
    ]});
    let answer = admin.send_json("PATCH", &format!("{USERS}/{user}"), &patch);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let renamed = "uid=renamed2,ou=people,dc=example,dc=com";
    let mut bound = ldap3::LdapConn::new(&server.ldap_url()).unwrap();
    assert_eq!(bound.simple_bind(renamed, "n3w-Passw0rd").unwrap().rc, 0);
    let (entries, _) = ldap
        .search(
            renamed,
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["userPassword"],
        )
        .unwrap()
        .success()
        .unwrap();
    let stored = ldap3::SearchEntry::construct(entries[0].clone());
    let value = stored
        .attrs
        .get("userPassword")
        .and_then(|values| values.first().cloned())
        .unwrap_or_default();
    assert!(value.starts_with('{'), "stored hashed: {value}");
    // Removing the last member by filter leaves the group with none (the empty DN stands in).
    let patch = json!({"Operations": [
        {"op": "remove", "path": format!("members[value eq \"{user}\"]")},
    ]});
    let answer = admin.send_json("PATCH", &format!("{GROUPS}/{group}"), &patch);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.json()["members"]
        .as_array()
        .is_none_or(Vec::is_empty));
}

/// Emails added by a PATCH are LDAP adds of those values: values added over LDAP meanwhile
/// stay (before, the PATCH replaced the attribute with what it had read, losing them).
#[test]
fn a_patch_keeps_values_added_meanwhile_over_ldap() {
    let (server, client) = start(3, Vec::new());
    let admin = admin(&client);
    let user = admin
        .get(&format!("{USERS}?filter=userName%20eq%20%22u0000001%22"))
        .json()["Resources"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let dn = common::person_dn(1);
    let rounds = 60;
    let ldap_url = server.ldap_url();
    let writer = std::thread::spawn(move || {
        let mut ldap = common::bind_url(&ldap_url, ROOT_DN, ROOT_PASSWORD);
        for round in 0..rounds {
            let value = format!("ldap{round}@example.com");
            ldap.modify(
                &dn,
                vec![ldap3::Mod::Add(
                    "mail",
                    std::collections::HashSet::from([value.as_str()]),
                )],
            )
            .unwrap()
            .success()
            .unwrap();
        }
    });
    for round in 0..rounds {
        let patch = json!({"Operations": [{"op": "add", "path": "emails",
            "value": [{"value": format!("scim{round}@example.com")}]}]});
        let answer = admin.send_json("PATCH", &format!("{USERS}/{user}"), &patch);
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    writer.join().unwrap();
    let emails = admin.get(&format!("{USERS}/{user}")).json()["emails"].clone();
    let values: Vec<&str> = emails
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|email| email["value"].as_str())
        .collect();
    let lost: Vec<String> = (0..rounds)
        .flat_map(|round| {
            [
                format!("ldap{round}@example.com"),
                format!("scim{round}@example.com"),
            ]
        })
        .filter(|value| !values.contains(&value.as_str()))
        .collect();
    assert!(lost.is_empty(), "lost {} values: {lost:?}", lost.len());
    assert_eq!(values[0], "u0000001@example.com", "the primary stays first");
}
