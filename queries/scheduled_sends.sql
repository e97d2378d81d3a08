-- scheduled_sends: scheduled sends that fired with no review window, and those stopped inside it (cancelled by a reviewer, or refused at fire because the policy moved).
--
-- A send tool guarded by ScheduledSends.schedule_send records each step of a send's life on a
-- span carrying schedule.id, schedule.event, schedule.tool and schedule.window_seconds. Rows:
--   'fired_unreviewed'  a fire (schedule.event fired) of a send whose window was 0 s: it went out
--                       with nobody able to look first. verdict 'happened'.
--   'cancelled'         a reviewer's cancel (schedule.event cancelled): it never went out.
--                       in_window (schedule.in_window) says whether the cancel came before the
--                       send was due, by the guard's clock.
--                       verdict 'prevented'.
--   'refused_at_fire'   a fire refused by the guard (schedule.event refused_at_fire): the policy
--                       was superseded inside the window. verdict 'prevented'.
-- Sends that fired after a window longer than 0 s are not listed: someone could have looked.
--
-- Scope: every span is judged alone (a fire runs in a worker, often in another trace than the
-- call that scheduled it; schedule_id joins them).
--
-- Verdict: happened for 'fired_unreviewed'; prevented for 'cancelled' and 'refused_at_fire'.
--
-- Columns: verdict, verdict_basis, kind, run_id, schedule_id,
--   send_tool, agent_id (who scheduled it, for a fire; who cancelled, for a cancel),
--   window_seconds, fires_at, in_window, event_time, outcome, trace_id, span_id
--
-- Example: happened, fired_unreviewed, sch_3f.., broadcast_push, window 0; prevented, cancelled,
--   sch_9a.., send_customer_message, cancelled by lead 40 s into its 600 s window.
WITH events AS (
    SELECT
        run_id, agent_id, outcome, trace_id, span_id, start_time, schedule_event AS event, schedule_id,
        schedule_tool AS send_tool, schedule_window_seconds AS window_seconds, schedule_fires_at AS fires_at,
        schedule_in_window AS in_window
    FROM spans
    WHERE tool_name IS NOT NULL AND schedule_event IS NOT NULL
),
listed AS (
    SELECT *,
        CASE event WHEN 'fired' THEN 'fired_unreviewed' WHEN 'cancelled' THEN 'cancelled'
                   WHEN 'refused_at_fire' THEN 'refused_at_fire' END AS kind
    FROM events
    WHERE (event = 'fired' AND window_seconds = 0) OR event IN ('cancelled', 'refused_at_fire')
)
SELECT
    CASE kind WHEN 'fired_unreviewed' THEN 'happened' ELSE 'prevented' END AS verdict,
    CASE kind
        WHEN 'fired_unreviewed' THEN 'fired with a 0 s review window: nobody could look before it went out'
        WHEN 'cancelled' THEN 'cancelled by a reviewer before it fired'
        ELSE 'the policy moved inside the window: the fire was refused (' || coalesce(outcome, '?') || ')'
    END AS verdict_basis,
    kind, run_id, schedule_id, send_tool, agent_id, window_seconds, fires_at,
    CASE WHEN kind = 'cancelled' THEN in_window END AS in_window,
    start_time AS event_time, outcome, trace_id, span_id
FROM listed
ORDER BY verdict, event_time, schedule_id, span_id;
