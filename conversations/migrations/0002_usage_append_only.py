from django.db import migrations

# The usage ledger is append-only; the trigger makes that hold even for code that bypasses the ORM.
# TRUNCATE (used by test database flushes) is a statement-level operation and is not affected.
FORBID = """
CREATE OR REPLACE FUNCTION conversations_usage_record_forbid_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'conversations_usagerecord is append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER conversations_usage_record_append_only
    BEFORE UPDATE OR DELETE ON conversations_usagerecord
    FOR EACH ROW EXECUTE FUNCTION conversations_usage_record_forbid_change();
"""

ALLOW = """
DROP TRIGGER IF EXISTS conversations_usage_record_append_only ON conversations_usagerecord;
DROP FUNCTION IF EXISTS conversations_usage_record_forbid_change();
"""


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]

    operations = [migrations.RunSQL(FORBID, ALLOW)]
