"""Whatever the database holds, a read answers 200 or a 4xx, never 500.

Odd JSON is written straight into the rows, past the model, as an old row or a bulk import could
have left it: traits nested ~940 levels deep (Django's recursive json.loads fails on them), traits
that are not an object, numbers beyond what Python or JSON carry, lone surrogates (SQLite keeps
them). Trait names are one key whatever their characters: "0", "2147483648" (PostgreSQL refused
`jsonb ->> bigint`) and "a__b" (read as the path a -> b) included.
"""

import math

import pytest
from django.db import connection, connections
from django.utils import timezone

from engagement.models import AccountScore, Segment, Workspace
from engagement.segments import segment_refresh
from engagement.stored_json import READ_MAX_DEPTH
from tests.readapi.conftest import (
    add_account,
    add_segment,
    add_user,
    join,
    score_account,
    score_user,
)

ON_POSTGRESQL = connections.settings["default"]["ENGINE"] == "django.db.backends.postgresql"
postgresql_only = pytest.mark.skipif(not ON_POSTGRESQL, reason="SQLite cannot store this")
sqlite_only = pytest.mark.skipif(ON_POSTGRESQL, reason="PostgreSQL refuses to store this")

DEEP = 940  # the depth of the report: past what json.loads manages in a request


def store_json(record, field: str, text: str) -> None:
    """Write JSON text into the record's row as it is, past the model and its encoder."""
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    table = record._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {field} = %s{cast} WHERE id = %s", [text, record.id])  # noqa: S608


def stored_json(record, field: str) -> str:
    table = record._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {field} FROM {table} WHERE id = %s", [record.id])  # noqa: S608
        return cursor.fetchone()[0]


def nested(levels: int) -> str:
    """JSON text of `levels` objects one inside the other: {"k": {"k": ... "x" ...}}."""
    return '{"k": ' * levels + '"x"' + "}" * levels


def deep_traits(name: str, levels: int = DEEP) -> str:
    return f'{{"name": "{name}", "plan": "pro", "nested": {nested(levels)}}}'


def rendered_depth(traits: dict) -> tuple[int, object]:
    """How many levels came out as objects (the traits object is level 1), and what came below."""
    level, value = 2, traits["nested"]
    while isinstance(value, dict):
        level, value = level + 1, value["k"]
    return level - 1, value


def ok(response) -> dict:
    assert response.status_code == 200, response.content[:300]
    return response.json()


# --- 1. Deeply nested traits ------------------------------------------------------------------


def test_users_with_deeply_nested_traits_are_listed_and_shown(read, acme):
    scored = add_user(acme, "deep_scored", "scored@deep.test")
    unscored = add_user(acme, "deep_unscored", "unscored@deep.test")
    plain = add_user(acme, "plain", "plain@deep.test", plan="free")
    for user in (scored, unscored):
        store_json(user, "traits", deep_traits(user.tracking_id))
    score_user(acme.workspace, scored, 70)
    workspace_id = acme.workspace.id

    listed = ok(read(acme, "/v2/users", workspace_id=workspace_id))
    expanded = ok(read(acme, "/v2/users", workspace_id=workspace_id, expand="traits,segments"))
    found = ok(
        read(
            acme,
            "/v2/users",
            workspace_id=workspace_id,
            match_type="email",
            match_value="unscored@deep.test",
            expand="traits",
        )
    )
    detail = ok(read(acme, f"/v2/users/{scored.id}", expand="traits"))
    plain_detail = ok(read(acme, f"/v2/users/{plain.id}", expand="traits"))

    assert [u["id"] for u in listed["data"]] == [scored.id, unscored.id, plain.id]
    assert [u["id"] for u in expanded["data"]] == [scored.id, unscored.id, plain.id]
    assert [u["id"] for u in found["data"]] == [unscored.id]
    assert detail["engagement_score"] == 70
    assert detail["traits"]["plan"] == "pro"
    assert rendered_depth(detail["traits"])[0] == READ_MAX_DEPTH
    assert rendered_depth(found["data"][0]["traits"])[0] == READ_MAX_DEPTH
    assert plain_detail["traits"] == {"plan": "free", "email": "plain@deep.test"}


def test_accounts_with_deeply_nested_traits_are_listed_and_shown(read, acme):
    scored = add_account(acme, "deep_scored")
    unscored = add_account(acme, "deep_unscored")
    for account in (scored, unscored):
        store_json(account, "traits", deep_traits(f"Deep {account.tracking_id}"))
    score_account(acme.workspace, scored, 80)
    workspace_id = acme.workspace.id

    listed = ok(read(acme, "/v2/accounts", workspace_id=workspace_id))
    expanded = ok(read(acme, "/v2/accounts", workspace_id=workspace_id, expand="traits"))
    detail = ok(read(acme, f"/v2/accounts/{unscored.id}", expand="traits,segments"))
    by_id = ok(read(acme, "/v1/accounts", workspace_id=workspace_id, id=scored.id, expand="traits"))
    by_name = ok(
        read(
            acme,
            "/v1/accounts",
            workspace_id=workspace_id,
            match_type="name",
            match_value="deep deep_scored",
            expand="traits",
        )
    )
    by_trait = ok(
        read(acme, "/v1/accounts", workspace_id=workspace_id, match_type="plan", match_value="pro")
    )

    assert [a["id"] for a in listed["data"]] == [scored.id, unscored.id]
    assert [a["name"] for a in listed["data"]] == ["Deep deep_scored", "Deep deep_unscored"]
    assert [rendered_depth(a["traits"])[0] for a in expanded["data"]] == [READ_MAX_DEPTH] * 2
    assert detail["name"] == "Deep deep_unscored"
    assert rendered_depth(detail["traits"])[0] == READ_MAX_DEPTH
    assert [a["id"] for a in by_id["data"]] == [scored.id]
    assert by_id["data"][0]["engagement_score"] == 80
    assert [a["id"] for a in by_name["data"]] == [scored.id]
    assert [a["id"] for a in by_trait["data"]] == [scored.id, unscored.id]


def test_segment_members_with_deeply_nested_traits_are_listed(read, acme):
    account = add_account(acme, "deep_account")
    user = add_user(acme, "deep_user")
    store_json(account, "traits", deep_traits("Deep Corp"))
    store_json(user, "traits", deep_traits("Deep Person"))
    accounts = add_segment(acme.workspace, "Accounts")
    users = add_segment(acme.workspace, "Users", target="users")
    join(accounts, account=account, joined_at=timezone.now())
    join(users, user=user, joined_at=timezone.now())

    account_members = ok(read(acme, f"/v2/segments/{accounts.id}/members"))
    user_members = ok(read(acme, f"/v2/segments/{users.id}/members"))

    assert [(m["type"], m["id"]) for m in account_members["data"]] == [("account", account.id)]
    assert [(m["type"], m["id"]) for m in user_members["data"]] == [("user", user.id)]


def test_the_rendering_rule_keeps_64_levels_and_renders_deeper_values_as_their_json_text(
    read, acme
):
    """The traits object is level 1; "nested" holds levels 2 and below."""
    at_the_bound = add_account(acme, "at_the_bound")
    past_the_bound = add_account(acme, "past_the_bound")
    store_json(at_the_bound, "traits", deep_traits("A", levels=READ_MAX_DEPTH - 1))
    store_json(past_the_bound, "traits", deep_traits("B", levels=READ_MAX_DEPTH))

    kept = ok(read(acme, f"/v2/accounts/{at_the_bound.id}", expand="traits"))["traits"]
    cut = ok(read(acme, f"/v2/accounts/{past_the_bound.id}", expand="traits"))["traits"]

    assert rendered_depth(kept) == (READ_MAX_DEPTH, "x")
    assert rendered_depth(cut) == (READ_MAX_DEPTH, '{"k": "x"}')


def test_the_deep_part_is_rendered_as_its_json_text(read, acme):
    user = add_user(acme, "deep")
    store_json(user, "traits", deep_traits("Deep"))

    traits = ok(read(acme, f"/v2/users/{user.id}", expand="traits"))["traits"]

    # Levels 2..64 of the 940 under "nested" came out as objects; the rest is one string.
    assert rendered_depth(traits)[1] == nested(DEEP - (READ_MAX_DEPTH - 1))


def test_reading_leaves_the_stored_traits_as_they_were(read, acme):
    account = add_account(acme, "deep")
    store_json(account, "traits", deep_traits("Deep"))
    before = stored_json(account, "traits")

    ok(read(acme, "/v2/accounts", workspace_id=acme.workspace.id, expand="traits"))
    ok(read(acme, f"/v2/accounts/{account.id}", expand="traits"))

    assert stored_json(account, "traits") == before
    assert before.count("{") == DEEP + 1


@postgresql_only
def test_traits_deeper_than_sqlite_stores_are_read_too(read, acme):
    account = add_account(acme, "deeper")
    store_json(account, "traits", deep_traits("Deeper", levels=5_000))

    body = ok(read(acme, f"/v2/accounts/{account.id}", expand="traits"))

    assert body["name"] == "Deeper"
    assert rendered_depth(body["traits"])[0] == READ_MAX_DEPTH


# --- Other stored values JSON cannot carry as they are ------------------------------------------


@pytest.mark.parametrize("text", ["[]", '"text"', "5", "null"])
def test_traits_that_are_not_an_object_read_as_empty(read, acme, text):
    account = add_account(acme, "odd")
    user = add_user(acme, "odd")
    store_json(account, "traits", text)
    store_json(user, "traits", text)

    accounts = ok(read(acme, "/v2/accounts", workspace_id=acme.workspace.id, expand="traits"))
    account_body = ok(read(acme, f"/v2/accounts/{account.id}", expand="traits"))
    users = ok(read(acme, "/v2/users", workspace_id=acme.workspace.id, expand="traits"))
    user_body = ok(read(acme, f"/v2/users/{user.id}", expand="traits"))

    assert [a["traits"] for a in accounts["data"]] == [{}]
    assert account_body["traits"] == {}
    assert account_body["name"] is None
    assert [u["traits"] for u in users["data"]] == [{}]
    assert user_body["traits"] == {}


def test_numbers_beyond_what_json_carries_are_rendered_as_their_text(read, acme):
    account = add_account(acme, "numbers")
    wide = "9" * 400 + ".5"  # a decimal beyond a double
    store_json(account, "traits", f'{{"name": "N", "long": 1{"0" * 5000}, "wide": {wide}}}')

    traits = ok(read(acme, f"/v2/accounts/{account.id}", expand="traits"))["traits"]

    assert traits["name"] == "N"
    assert traits["long"] == "1" + "0" * 5000
    assert traits["wide"] == wide


@sqlite_only
def test_lone_surrogates_are_rendered_as_replacement_characters(read, acme):
    account = add_account(acme, "surrogates")
    store_json(account, "traits", '{"name": "\\ud800 Corp", "\\udc00": "\\ud83d\\ude00"}')

    body = ok(read(acme, f"/v2/accounts/{account.id}", expand="traits"))

    assert body["name"] == "\ufffd Corp"
    assert body["traits"] == {"name": "\ufffd Corp", "\ufffd": "\U0001f600"}


@postgresql_only
def test_metrics_that_are_not_numbers_are_rendered_as_null(read, acme):
    account = add_account(acme, "nan")
    score_account(acme.workspace, account, 40)
    AccountScore.objects.filter(account=account).update(
        raw_score=math.inf, adoption=-math.inf, active_user_share=math.nan
    )

    body = ok(read(acme, f"/v2/accounts/{account.id}"))

    assert body["engagement_score"] == 40
    assert [body[name] for name in ("raw_score", "adoption")] == [None] * 2
    assert body["active_user_share"] is None


def test_odd_workspace_account_filters_do_not_break_reads(read, acme):
    kept = Workspace.objects.create(product=acme.product, name="Deep filter")
    listed = Workspace.objects.create(product=acme.product, name="List filter")
    store_json(kept, "account_filter", f'{{"plan": "pro", "deep": {nested(DEEP)}}}')
    store_json(listed, "account_filter", '["plan", "pro"]')
    add_account(acme, "acct_1", plan="pro")

    workspaces = ok(read(acme, "/v2/workspaces"))
    deep = ok(read(acme, f"/v2/workspaces/{kept.id}", expand="stats"))
    deep_accounts = ok(read(acme, "/v2/accounts", workspace_id=kept.id))
    list_accounts = ok(read(acme, "/v2/accounts", workspace_id=listed.id))

    assert [w["id"] for w in workspaces["data"]] == [acme.workspace.id, kept.id, listed.id]
    assert workspaces["data"][2]["account_filter"] == {}
    assert deep["account_filter"]["plan"] == "pro"
    assert deep["stats"] == {"users": 0, "accounts": 0}  # no account holds such a "deep" trait
    assert deep_accounts["data"] == []
    assert len(list_accounts["data"]) == 1  # a filter that is not an object filters nothing


def test_odd_segment_conditions_do_not_break_reads(read, acme):
    deep = add_segment(acme.workspace, "Deep")
    not_a_list = add_segment(acme.workspace, "Not a list")
    mixed = add_segment(acme.workspace, "Mixed")
    store_json(
        deep,
        "conditions",
        f'[{{"field": "trait:x", "operator": "equals", "value": {nested(DEEP)}}}]',
    )
    store_json(not_a_list, "conditions", '{"field": "trait:x"}')
    store_json(mixed, "conditions", '["text", {"field": "trait:x", "operator": "is_set"}]')

    listed = ok(read(acme, "/v2/segments", workspace_id=acme.workspace.id))
    detail = ok(read(acme, f"/v2/segments/{deep.id}"))
    members = ok(read(acme, f"/v2/segments/{deep.id}/members"))

    # After the ten built-in segments every workspace starts with.
    custom = [s for s in listed["data"] if not s["builtin"]]
    assert [s["id"] for s in custom] == [deep.id, not_a_list.id, mixed.id]
    assert custom[1]["conditions"] == []
    assert custom[2]["conditions"] == [{"field": "trait:x", "operator": "is_set"}]
    assert isinstance(detail["conditions"][0]["value"], dict)
    assert members["data"] == []


# --- 2. Trait names are names -------------------------------------------------------------------

LITERAL_NAMES = ["0", "2147483648", "-1", "a__b", "a.b", 'say "hi"', "back\\slash", "é", "$", "[0]"]


@pytest.mark.parametrize("name", LITERAL_NAMES)
def test_v1_lookup_takes_the_trait_name_as_one_key(read, acme, name):
    wanted = add_account(acme, "wanted", **{name: "hit"})
    add_account(acme, "other", **{"other": "hit", "a": {"b": "hit"}, "0x": "hit"})

    response = read(
        acme, "/v1/accounts", workspace_id=acme.workspace.id, match_type=name, match_value="hit"
    )

    assert [a["id"] for a in ok(response)["data"]] == [wanted.id]


def test_a__b_is_not_the_path_a_then_b(read, acme):
    add_account(acme, "nested", a={"b": "x"})
    literal = add_account(acme, "literal", **{"a__b": "y"})

    nested_value = read(
        acme, "/v1/accounts", workspace_id=acme.workspace.id, match_type="a__b", match_value="x"
    )
    literal_value = read(
        acme, "/v1/accounts", workspace_id=acme.workspace.id, match_type="a__b", match_value="y"
    )

    assert ok(nested_value)["data"] == []
    assert [a["id"] for a in ok(literal_value)["data"]] == [literal.id]


def test_a_digit_name_on_an_account_without_it_matches_nothing(read, acme):
    add_account(acme, "bare", name="Bare")

    for name in ("0", "2147483648", "99999999999999999999999"):
        response = read(
            acme, "/v1/accounts", workspace_id=acme.workspace.id, match_type=name, match_value="x"
        )
        assert ok(response)["data"] == []


def test_numbers_and_booleans_match_their_text_and_null_matches_nothing(read, acme):
    typed = add_account(acme, "typed", **{"0": 25, "1": True, "2": 2.5, "3": None})

    def lookup(name, value):
        response = read(
            acme, "/v1/accounts", workspace_id=acme.workspace.id, match_type=name, match_value=value
        )
        return [a["id"] for a in ok(response)["data"]]

    assert lookup("0", "25") == [typed.id]
    assert lookup("1", "true") == [typed.id]
    assert lookup("2", "2.5") == [typed.id]
    assert lookup("3", "null") == []


def test_domain_and_name_lookups_read_the_trait_of_that_name(read, acme):
    account = add_account(acme, "acct", domain="Acme.TEST", name="Acme Corp")

    by_domain = read(
        acme,
        "/v1/accounts",
        workspace_id=acme.workspace.id,
        match_type="domain",
        match_value=" acme.test ",
    )

    assert [a["id"] for a in ok(by_domain)["data"]] == [account.id]


def test_a_workspace_filter_takes_trait_names_as_keys(read, acme):
    workspace = Workspace.objects.create(product=acme.product, name="Filtered")
    Workspace.objects.filter(id=workspace.id).update(
        account_filter={"2147483648": "big", "0": "zero", "a__b": "literal"}
    )
    wanted = add_account(acme, "wanted", **{"2147483648": "big", "0": "zero", "a__b": "literal"})
    add_account(acme, "nested", **{"2147483648": "big", "0": "zero", "a": {"b": "literal"}})

    body = ok(read(acme, "/v2/accounts", workspace_id=workspace.id))
    stats = ok(read(acme, f"/v2/workspaces/{workspace.id}", expand="stats"))["stats"]

    assert [a["id"] for a in body["data"]] == [wanted.id]
    assert stats["accounts"] == 1


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("equals", "hit", {"wanted"}),
        ("not_equals", "hit", {"nested", "bare"}),
        ("contains", "HI", {"wanted"}),
        ("greater_than", "a", {"wanted"}),
        ("less_than", "z", {"wanted"}),
        ("is_set", None, {"wanted"}),
        ("is_not_set", None, {"nested", "bare"}),
    ],
)
@pytest.mark.parametrize("name", ["0", "2147483648", "a__b", 'say "hi"'])
def test_segment_conditions_take_the_trait_name_as_one_key(
    read, acme, name, operator, value, expected
):
    accounts = {
        "wanted": add_account(acme, "wanted", **{name: "hit"}),
        "nested": add_account(acme, "nested", a={"b": "hit"}, **{f"{name}x": "hit"}),
        "bare": add_account(acme, "bare"),
    }
    for account in accounts.values():
        score_account(acme.workspace, account, 10)
    segment = Segment.objects.create(
        workspace=acme.workspace,
        name="s",
        target=Segment.Target.ACCOUNTS,
        conditions=[{"field": f"trait:{name}", "operator": operator, "value": value}],
    )
    segment_refresh(segment=segment)

    body = ok(read(acme, f"/v2/segments/{segment.id}/members"))

    ids = {account.id: key for key, account in accounts.items()}
    assert {ids[m["id"]] for m in body["data"]} == expected


def test_user_segment_conditions_take_the_trait_name_as_one_key(read, acme):
    wanted = add_user(acme, "wanted", **{"0": "hit"})
    other = add_user(acme, "other", **{"00": "hit"})
    for user in (wanted, other):
        score_user(acme.workspace, user, 10)
    segment = Segment.objects.create(
        workspace=acme.workspace,
        name="s",
        target=Segment.Target.USERS,
        conditions=[{"field": "trait:0", "operator": "equals", "value": "hit"}],
    )
    segment_refresh(segment=segment)

    body = ok(read(acme, f"/v2/segments/{segment.id}/members"))

    assert [m["id"] for m in body["data"]] == [wanted.id]


# --- 3. Odd parameters: a 4xx, never a 500 -------------------------------------------------------

HUGE = str(2**70)


@pytest.mark.parametrize(
    "path",
    [
        f"/v2/workspaces/{HUGE}",
        f"/v2/accounts/{HUGE}",
        f"/v2/accounts/{2**63}",
        f"/v2/users/{HUGE}",
        f"/v2/segments/{HUGE}",
        f"/v2/segments/{HUGE}/members",
        f"/v2/accounts/{'9' * 5000}",
    ],
)
def test_ids_beyond_any_row_in_paths_are_404(read, acme, path):
    response = read(acme, path)

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v2/accounts", {"workspace_id": HUGE}, "workspace_id"),
        ("/v2/accounts", {"offset": HUGE}, "offset"),
        ("/v2/accounts", {"limit": HUGE}, "limit"),
        ("/v2/users", {"offset": "9" * 5000}, "offset"),
        ("/v2/segments", {"workspace_id": 2**63}, "workspace_id"),
        ("/v2/accounts/1", {"workspace_id": HUGE}, "workspace_id"),
        ("/v1/accounts", {"id": HUGE}, "id"),
    ],
)
def test_numbers_beyond_their_range_in_parameters_are_400(read, acme, path, params, field):
    params = {"workspace_id": acme.workspace.id, **params}

    response = read(acme, path, **params)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_parameters"
    assert list(response.json()["fields"]) == [field]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/accounts", {"match_type": "plan", "match_value": "a\x00b"}, "match_value"),
        ("/v1/accounts", {"match_type": "pl\x00an", "match_value": "x"}, "match_type"),
        ("/v1/accounts", {"match_type": "tracking_id", "match_value": "\x00"}, "match_value"),
        ("/v1/accounts", {"match_type": "domain", "match_value": "a\x00"}, "match_value"),
        ("/v2/users", {"match_type": "email", "match_value": "a\x00b"}, "match_value"),
        ("/v2/users", {"match_type": "tracking_id", "match_value": "\x00"}, "match_value"),
    ],
)
def test_nul_characters_in_parameters_are_400(read, acme, path, params, field):
    response = read(acme, path, workspace_id=acme.workspace.id, **params)

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]


def test_the_deepest_offset_answers_an_empty_page(read, acme):
    add_account(acme, "acct_1")

    body = ok(read(acme, "/v2/accounts", workspace_id=acme.workspace.id, offset=2**31 - 1))

    assert body["data"] == []
    assert body["pagination"]["total"] == 1
