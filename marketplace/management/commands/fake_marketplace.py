from django.core.management.base import BaseCommand, CommandError

from marketplace.fake import FakeMarketplace

# The accounts of make run's demo (its printed identify joins usr_123 to the account acme).
DEMO_ACCOUNTS = {"acme": "Acme Inc."}


def _accounts(values: list[str] | None) -> dict[str, str]:
    if not values:
        return dict(DEMO_ACCOUNTS)
    accounts = {}
    for value in values:
        cloud_id, sep, company = value.partition("=")
        if not sep or not cloud_id.strip() or not company.strip():
            raise CommandError(f"--account {value!r}: expected CLOUD_ID=COMPANY")
        accounts[cloud_id.strip()] = company.strip()
    return accounts


class Command(BaseCommand):
    help = (
        "Serve a fake marketplace API (vendor lookup, app listing, license, transaction and "
        "feedback reporting) with generated data, for trying the connection locally. Inject "
        "errors with POST /_fake/inject?status=429&count=3&retry_after=1 (add "
        "&endpoint=transactions or feedback for those lists)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--licenses", type=int, default=500, help="Licenses to generate.")
        parser.add_argument("--apps", type=int, default=3, help="Apps in the vendor's listing.")
        parser.add_argument(
            "--transactions",
            type=int,
            default=None,
            help="Transaction lines to generate over the licenses (default: one per license).",
        )
        parser.add_argument("--email", default="vendor@example.com")
        parser.add_argument("--token", default="fake-token")
        parser.add_argument("--vendor-id", default="12345")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--account",
            action="append",
            metavar="CLOUD_ID=COMPANY",
            help="A site whose license matches an account you already have (repeatable; "
            f"default {' '.join(f'{k}={v}' for k, v in DEMO_ACCOUNTS.items())}: the account "
            "make run's curl lines create).",
        )

    def handle(self, *args, **options):
        accounts = _accounts(options["account"])
        fake = FakeMarketplace(
            licenses=options["licenses"],
            apps=options["apps"],
            email=options["email"],
            token=options["token"],
            vendor_id=options["vendor_id"],
            seed=options["seed"],
            accounts=accounts,
            transactions=options["transactions"],
        )
        server = fake.serve(options["host"], options["port"])
        app = fake.apps[0]
        self.stdout.write(
            f"Fake marketplace at {fake.base_url} (set MARKETPLACE_API_URL to it)\n"
            f"  email {fake.email}  token {fake.token}  vendor ID {fake.vendor_id}\n"
            f"  app {app['appName']} ({app['appKey']}), productId {app['productId']}, "
            f"{len(fake.licenses)} licenses, {len(fake.transactions)} transactions, "
            f"{len(fake.feedback)} feedback, among them the sites "
            + ", ".join(f"{cid} ({company})" for cid, company in accounts.items())
        )
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
