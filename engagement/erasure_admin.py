"""Admin side of erasure: the erase action (with a confirmation page) on users and accounts,
and the suppressions, which an admin lifts by deleting them."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from engagement.erasure import erasure_request, suppression_lift
from engagement.models import Erasure, Suppression


class EraseForm(forms.Form):
    suppress = forms.BooleanField(
        required=False, help_text="Also drop data that arrives later for these tracking ids."
    )


class ErasureActionMixin(admin.ModelAdmin):
    """Adds "Erase selected ..." to a User or Account admin."""

    erasure_kind: str

    @admin.action(description="Erase selected (with a confirmation)")
    def erase(self, request, queryset):
        if request.POST.get("confirmed") == "yes":
            form = EraseForm(request.POST)
            form.is_valid()
            for target in queryset:
                erasure_request(
                    product_id=target.product_id,
                    kind=self.erasure_kind,
                    target_id=target.id,
                    suppress=form.cleaned_data.get("suppress", False),
                    via=Erasure.Via.ADMIN,
                    admin_user_id=request.user.id,
                )
            self.message_user(request, f"Erasure of {queryset.count()} queued.", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase for good?",
            "targets": queryset,
            "form": EraseForm(),
            "opts": self.model._meta,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/engagement/erase_confirmation.html", context)


@admin.register(Erasure)
class ErasureAdmin(admin.ModelAdmin):
    list_display = ["id", "product", "kind", "status", "via", "suppress", "requested_at"]
    list_filter = ["status", "kind", "via"]
    readonly_fields = [field.name for field in Erasure._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Suppression)
class SuppressionAdmin(admin.ModelAdmin):
    list_display = ["id", "product", "kind", "erasure", "created_at"]
    list_filter = ["product", "kind"]
    actions = ["lift"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Lift selected suppressions (later data is applied again)")
    def lift(self, request, queryset):
        lifted = sum(suppression_lift(suppression_id=s.id) for s in queryset)
        self.message_user(request, f"Lifted {lifted} suppression(s).", messages.SUCCESS)
