"""The admin's lists of users and accounts: name, score, change, rank and last seen in the
product's default workspace, and a subject's traits as a table."""

from django.contrib import admin
from django.db.models import OuterRef, Q, Subquery, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce
from django.template.loader import render_to_string

from engagement.models import AccountScore, UserScore, Workspace
from engagement.presentation import split_traits
from engagement.scoring.ranks import workspace_percentile_ranks
from engagement.stored_json import read_traits


def _default_workspace_id():
    """The id of the product's first workspace (the one it was created with), for a subquery
    nested in a score subquery whose outer query is a user or an account."""
    return Subquery(
        Workspace.objects.filter(product_id=OuterRef(OuterRef("product_id")))
        .order_by("id")
        .values("id")[:1]
    )


def _score_annotations(score_model, subject: str) -> dict:
    """Score, change and last seen in the product's default workspace (and that workspace): one
    correlated subquery per column, so a page of the list is one query whatever its size. The
    percentile rank is read from the score (ScoredListMixin.rank)."""
    scores = score_model.objects.filter(
        **{f"{subject}_id": OuterRef("pk")}, workspace_id=_default_workspace_id()
    )

    def column(name):
        return Subquery(scores.values(name)[:1])

    return {
        "default_score": Coalesce(column("engagement_score"), Value(0)),
        "default_score_change": Coalesce(column("score_change"), Value(0)),
        "default_last_seen": column("last_seen"),
        "default_workspace_id": Subquery(
            Workspace.objects.filter(product_id=OuterRef("product_id"))
            .order_by("id")
            .values("id")[:1]
        ),
    }


def trait(key: str):
    return KeyTextTransform(key, "traits")


def traits_table(obj) -> str:
    """The traits as a read-only table: the subject's own, then the marketplace license
    (`am.` traits) under its own heading. Values are escaped by the template."""
    traits = read_traits(obj) if obj is not None and obj.pk else {}
    own, license_ = split_traits(traits)
    return render_to_string(
        "admin/engagement/traits_table.html",
        {"groups": [("Traits", own), ("Marketplace license", license_)], "empty": not traits},
    )


class ScoredListMixin(admin.ModelAdmin):
    """Name, score, change, rank and last seen in the default workspace, sortable, searchable by
    name, email and tracking id. Subjects come from ingestion: nothing to add or edit here."""

    score_model: type[UserScore] | type[AccountScore]
    score_subject = ""
    searched_traits: list[str] = []
    searched_fields: list[str] = []

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(display_name=self.name_expression())
            .annotate(**_score_annotations(self.score_model, self.score_subject))
        )

    def name_expression(self):
        """What the Name column sorts by: the name trait as text (the column shows the name
        engagement.presentation gives, as the read API and the dashboard do)."""
        return trait("name")

    def presented_name(self, obj) -> str | None:
        raise NotImplementedError

    @admin.display(description="Name", ordering="display_name")
    def name(self, obj):
        return self.presented_name(obj) or "-"

    @admin.display(description="Score", ordering="default_score")
    def score(self, obj):
        return obj.default_score

    @admin.display(description="Change", ordering="default_score_change")
    def score_change(self, obj):
        change = obj.default_score_change
        return f"+{change}" if change > 0 else str(change)

    # A rank orders as its score does (a score of 0, or none, has no rank).
    @admin.display(description="Rank (percentile)", ordering="default_score")
    def rank(self, obj):
        if not obj.default_score or obj.default_workspace_id is None:
            return "–"
        known: dict[int, tuple[float | None, ...]] = self.__dict__.setdefault("_ranks", {})
        ranks = known.get(obj.default_workspace_id)
        if ranks is None:
            ranks = workspace_percentile_ranks(obj.default_workspace_id, self.score_subject)
            known[obj.default_workspace_id] = ranks
        rank = ranks[obj.default_score]
        return "–" if rank is None else f"{rank:.0f}"

    def changelist_view(self, request, extra_context=None):
        # The ranks of each workspace on the page, read once per page shown.
        self.__dict__["_ranks"] = {}
        return super().changelist_view(request, extra_context)

    @admin.display(description="Last seen", ordering="default_last_seen")
    def last_seen(self, obj):
        return obj.default_last_seen

    @admin.display(description="Traits")
    def traits_table(self, obj):
        return traits_table(obj)

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        query = Q(tracking_id__icontains=term)
        for field in self.searched_traits:
            query |= Q(**{f"traits__{field}__icontains": term})
        for field in self.searched_fields:
            query |= Q(**{f"{field}__icontains": term})
        return queryset.filter(query), False
