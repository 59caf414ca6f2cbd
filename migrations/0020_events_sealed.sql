-- An event's data may be stored encrypted (`sealed`, src/data-keys/seal.ts) instead of in clear
-- (`data`): one of the two is set. Expand steps: 0.1.0's processes keep inserting `data` and
-- reading it, and this release writes clear data while one of them is connected
-- (src/events/sealing.ts). Dropping NOT NULL and adding a nullable column are catalogue changes:
-- no row is read or written, the lock is held for a moment.
-- loosens: events.data, null only for sealed rows, which no broker writes while one of the previous release is connected (src/events/sealing.ts)
ALTER TABLE "events" ALTER COLUMN "data" DROP NOT NULL;
--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "sealed" bytea;
