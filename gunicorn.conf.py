"""gunicorn reads this file from the working directory. Its own limits on the request head sit
above the ones both ingestion doors answer alike (ingestion/acceptance/http.py), so a client sees
the same 414 or 431, with the service's JSON error body, whichever door it reaches."""

limit_request_line = 8190  # the most gunicorn allows; the doors answer 414 above 4,094 bytes
limit_request_field_size = 65536  # the doors answer 431 above 8,190 bytes
limit_request_fields = 200  # the doors answer 431 above 100 fields
